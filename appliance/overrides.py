"""Settings given outside ``appliance.toml``: ``APPLIANCE_<SECTION>_<KEY>`` environment
variables and ``appliance run --conf spark.key=value``.

Both name a key that the file spells in TOML, so both must be able to spell every key the
file can. Environment variable names are conventionally upper case, which loses the case
of keys such as Spark's ``spark.sql.streaming.stopTimeout`` or the reader's
``maxOffsetsPerTrigger``; so for the pass-through sections (``[kafka]``, ``[spark]``,
``[source]``, ``[sink]``, whose keys are the libraries' own) the name after the section
keeps its case as soon as it has a lower-case letter:

=====================================================  ====================================
``APPLIANCE_SPARK_spark_sql_streaming_stopTimeout=5s``  ``spark.sql.streaming.stopTimeout``
``APPLIANCE_SPARK_spark_executorEnv_JAVA__HOME=/jdk``   ``spark.executorEnv.JAVA_HOME``
``APPLIANCE_SPARK_SPARK_DRIVER_MEMORY=2g``              ``spark.driver.memory`` (all upper
                                                        case: lower-cased, as before)
=====================================================  ====================================

``_`` stands for ``.`` and ``__`` for a literal ``_``. The appliance's own keys
(``APPLIANCE_QUERY_TRIGGER``, ``APPLIANCE_SPARK_DRIVER_HOST``...) match in any case.

``--conf`` takes the key exactly as spark-submit does (``KEY=VALUE``, the value may hold
``=``); only ``spark.*`` keys, since the other sections have keys of their own.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

ENV_PREFIX = "APPLIANCE_"
#: ``APPLIANCE_`` variables that are not settings of ``appliance.toml`` (each is read where
#: its constant is; tests/appliance/test_config_corpus.py holds this list to them).
OTHER_VARIABLES = frozenset({
    "APPLIANCE_CLASS_ARCHIVE_DIR",  # appliance.process.class_archive.DIR_ENV
    "APPLIANCE_BROKER_USER_PASSWORD",  # appliance.broker.users_cli.PASSWORD_ENV
    "APPLIANCE_BROKER_STRICT_ENCODING",  # appliance.broker.wire.codegen.STRICT_ENV
})
CONF_FLAG = "--conf"
_LITERAL_UNDERSCORE = "\0"


class OverrideError(ValueError):
    """A ``--conf`` argument that is not ``spark.KEY=VALUE``; ``str()`` is one line."""


@dataclass(frozen=True)
class Section:
    """What the config model says about one ``[section]``."""

    name: str
    fields: frozenset[str]  # the appliance's own keys
    passthrough: bool  # other keys are a library's settings (kept as spelled)


@dataclass(frozen=True)
class Override:
    """One setting from outside the file; ``origin`` names it in error lines."""

    section: str
    key: str
    value: str
    origin: str


def env_key(spelled: str) -> str:
    """A pass-through key as spelled in a variable name (see the module docstring)."""
    if spelled == spelled.upper():
        return spelled.lower().replace("_", ".")
    return (spelled.replace("__", _LITERAL_UNDERSCORE).replace("_", ".")
            .replace(_LITERAL_UNDERSCORE, "_"))


def env_name(section: str, key: str, passthrough: bool) -> str:
    """The variable that sets ``[section] key``: ``APPLIANCE_QUERY_TRIGGER``; a pass-through
    key with upper case or ``_`` in it keeps its case (``env_key`` reads it back)."""
    head = f"{ENV_PREFIX}{section.upper()}_"
    if not passthrough or (key == key.lower() and "_" not in key):
        return head + key.upper().replace(".", "_")
    return head + key.replace("_", "__").replace(".", "_")


def from_environ(environ: Mapping[str, str], sections: Iterable[Section]) -> list[Override]:
    """Every ``APPLIANCE_<SECTION>_<KEY>`` variable of a known section, in name order."""
    by_name = {section.name: section for section in sections}
    out = []
    for name in sorted(environ):
        if not name.startswith(ENV_PREFIX):
            continue
        section_name, _, spelled = name[len(ENV_PREFIX):].partition("_")
        section = by_name.get(section_name.lower())
        if section is None or not spelled:
            continue
        key = spelled.lower()
        if key not in section.fields and section.passthrough:
            key = env_key(spelled)
        out.append(Override(section.name, key, environ[name], name))
    return out


@dataclass(frozen=True)
class StrayVariable:
    """An ``APPLIANCE_`` variable that sets nothing: no such section, or no key after it."""

    name: str
    problem: str  # "names no section of appliance.toml", ...
    suggestion: str | None  # the variable it most likely meant

    def line(self) -> str:
        hint = f" (did you mean {self.suggestion}?)" if self.suggestion else ""
        return f"{self.name}: {self.problem}{hint}"


def stray_variables(environ: Mapping[str, str],
                    sections: Iterable[Section]) -> list[StrayVariable]:
    """Every ``APPLIANCE_`` variable ``from_environ`` would ignore (a misspelt section:
    ``APPLIANCE_QEURY_TRIGGER``), in name order; ``OTHER_VARIABLES`` are not strays."""
    by_name = {section.name: section for section in sections}
    out = []
    for name in sorted(environ):
        if not name.startswith(ENV_PREFIX) or name in OTHER_VARIABLES:
            continue
        section_name, _, spelled = name[len(ENV_PREFIX):].partition("_")
        section = by_name.get(section_name.lower())
        if section is not None and spelled:
            continue
        if section is not None:
            out.append(StrayVariable(name, f"names no key of [{section.name}] (the form is "
                                           f"{ENV_PREFIX}<SECTION>_<KEY>)", None))
            continue
        match = difflib.get_close_matches(section_name.lower(), list(by_name), n=1,
                                          cutoff=0.6)
        suggestion = (f"{ENV_PREFIX}{match[0].upper()}_{spelled}"
                      if match and spelled else None)
        out.append(StrayVariable(name, f"names no section of appliance.toml (sections: "
                                       f"{', '.join(by_name)})", suggestion))
    return out


_CONF = re.compile(r"^(spark\.[^=\s]+)=(.*)$", re.S)


def from_conf(arguments: Collection[str]) -> list[Override]:
    """``["spark.sql.shuffle.partitions=4", ...]`` (``--conf``, repeatable) -> overrides of
    ``[spark]``, later ones winning."""
    out = []
    for argument in arguments:
        match = _CONF.match(argument)
        if not match:
            raise OverrideError(f"{CONF_FLAG} {argument}: must be spark.KEY=VALUE "
                                f"(e.g. {CONF_FLAG} spark.driver.memory=2g)")
        out.append(Override("spark", match.group(1), match.group(2),
                            f"{CONF_FLAG} {match.group(1)}"))
    return out
