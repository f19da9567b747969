"""Load and validate ``appliance.toml`` (plus ``APPLIANCE_<SECTION>_<KEY>`` env overrides and
``--conf``; their spelling: ``appliance.overrides``).

Everything is checked before anything starts, so an operator learns about a typo in one
line (``appliance.toml: query.trigger: must be one of ...``) instead of from a stack trace
minutes later. This module is the one source of truth for defaults and topic names, so it
also writes the file back (``config_to_toml``/``write_config``): tests, benchmarks and tools
that start ``appliance run`` build a checked ``Config`` and write it, instead of each
keeping its own template of the file's keys.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import tomllib
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator, model_validator
from pydantic_core import PydanticCustomError

from appliance.broker.toml_file import read_toml
from appliance.client_security import ClientSecurity, SecuritySettingsError
from appliance.cpu_list import parse_cpu_list
from appliance.durations import spark_interval
from appliance.kafka_properties import (
    KAFKA_SECTION,
    SINK_SECTION,
    SOURCE_SECTION,
    PropertyProblem,
    SectionNames,
    check_properties,
)
from appliance.overrides import Override, Section, env_name, from_environ, stray_variables
from appliance.topic_defaults import DEFAULT_TOPICS
from appliance.trigger import TriggerMode, interval_ms, trigger_mode

DEFAULT_CONFIG_FILE = "appliance.toml"
# Where the embedded broker listens unless ``[kafka] embedded_port`` says otherwise: Kafka's
# own port, so the documented commands (``--host 127.0.0.1:9092``) reach it as written.
EMBEDDED_PORT = 9092
# The two words of ``[spark] class_archive`` that are not a path (appliance.process.class_archive).
ARCHIVE_AUTO = "auto"
ARCHIVE_OFF = "off"

_TOPIC = re.compile(r"^[A-Za-z0-9._-]{1,249}$")


class ConfigError(Exception):
    """A bad config value; ``str()`` is the one line the CLI prints before exiting 2."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class KafkaConfig(BaseModel):
    """``bootstrap_servers`` absent means "start the embedded broker"; every other key is
    a Kafka client property (SASL/SSL...) handed to both the Spark connector and the
    appliance's own admin client."""

    model_config = ConfigDict(extra="allow", frozen=True)
    bootstrap_servers: str | None = None
    # The embedded broker's port on 127.0.0.1 (only without bootstrap_servers); 0 = any
    # free port (``appliance demo``, tests), logged in ``broker.embedded``.
    embedded_port: int = EMBEDDED_PORT

    @field_validator("embedded_port")
    @classmethod
    def _embedded_port(cls, value: int) -> int:
        return _within(value, 0, 65535, "any free port")

    @model_validator(mode="after")
    def _embedded_only(self) -> KafkaConfig:
        if self.bootstrap_servers is not None and "embedded_port" in self.model_fields_set:
            raise ValueError("embedded_port is for the embedded broker, which starts only "
                             "without bootstrap_servers: remove one of them")
        return self

    @field_validator("bootstrap_servers")
    @classmethod
    def _servers(cls, value: str | None) -> str | None:
        if value is not None and not re.match(r"^[^\s,:]+:\d+(,[^\s,:]+:\d+)*$", value):
            raise ValueError(f"must be host:port[,host:port...] (got {value!r})")
        return value

    @property
    def properties(self) -> dict[str, str]:
        """Pass-through client properties (everything but ``bootstrap_servers``)."""
        return {k: str(v) for k, v in (self.model_extra or {}).items()}

    @property
    def security(self) -> ClientSecurity:
        """TLS/SASL settings, for every client dialect (client_security.py)."""
        return ClientSecurity.from_properties(self.properties)

    @property
    def java_properties(self) -> dict[str, str]:
        """The properties for Java kafka-clients (the connector), librdkafka spellings of
        credentials and CA translated."""
        return self.security.java(self.properties)

    @model_validator(mode="after")
    def _known_properties(self) -> KafkaConfig:
        """Every pass-through key is a Kafka client property (``appliance.kafka_properties``;
        ``check_config`` lists each one found, this refuses a model built another way)."""
        _refuse_properties(self.model_extra or {}, KAFKA_SECTION)
        return self

    @model_validator(mode="after")
    def _security(self) -> KafkaConfig:
        try:
            ClientSecurity.from_properties(self.properties)
        except SecuritySettingsError as exc:  # names the property, never its value
            raise PydanticCustomError("kafka_security", str(exc)) from None
        return self


def _refuse_properties(props: dict[str, Any], names: SectionNames) -> None:
    problems = check_properties(props, names)
    if problems:
        raise PydanticCustomError("kafka_property", "{key}: {message}",
                                  {"key": problems[0].key, "message": problems[0].said()})


class TopicsConfig(_Section):
    events: str = DEFAULT_TOPICS.events
    alerts: str = DEFAULT_TOPICS.alerts
    dead_letters: str = DEFAULT_TOPICS.dead_letters
    # Synthetic records of the start-up warm-up (appliance.query.warmup); the embedded broker
    # creates it, on an external cluster it is used only if the operator created it.
    warmup: str = DEFAULT_TOPICS.warmup

    @field_validator("events", "alerts", "dead_letters", "warmup")
    @classmethod
    def _topic(cls, value: str) -> str:
        if not _TOPIC.match(value):
            raise ValueError(f"must be a Kafka topic name [A-Za-z0-9._-] (got {value!r})")
        return value


# Continuous: no committed epoch for this long means the query is stuck (appliance.
# epoch_watch). By default STALL_INTERVALS intervals and at least STALL_MIN_S; an explicit
# ``[query] stall_timeout`` at least MIN_STALL_INTERVALS intervals and MIN_STALL_MS (a
# saturated machine's epochs were seen a few seconds late).
STALL_INTERVALS = 20
STALL_MIN_S = 60.0
MIN_STALL_INTERVALS = 5
MIN_STALL_MS = 10_000.0


def _a_path(value: str) -> str:
    """A path setting: blank would mean the config file's directory, never intended."""
    if not value.strip():
        raise ValueError("must be a path (got a blank value)")
    return value


def _duration_text(value: object) -> object:
    """A duration key written as a TOML number is seconds, as on the command line
    (``interval = 2`` is ``"2"``, read by ``appliance.durations``)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return repr(value)
    return value


# An integer setting, required (int) or optional (int | None): ``_within`` returns its own.
_Int = TypeVar("_Int", int, int | None)


def _within(value: _Int, low: int, high: int, zero_means: str) -> _Int:
    """An integer setting in ``low..high`` (None = unset), its error saying what 0 does."""
    if value is not None and not low <= value <= high:
        raise ValueError(f"must be {low}..{high}, 0 = {zero_means} (got {value!r})")
    return value


class QueryConfig(_Section):
    trigger: str = "continuous"
    interval: str | None = None  # None: the trigger mode's default_interval
    checkpoint_dir: str = "var/checkpoints"
    starting_offsets: str = "earliest"
    # Run the query's plan over synthetic records before ``appliance.ready``
    # (appliance.query.warmup).
    warmup: bool = True
    # Micro-batch: streaming micro-batches the warm-up runs after its rounds, so each
    # batch's planning is compiled before ``ready`` (appliance.query.warmup.StreamWarmup);
    # 0: none. Off by default: 12 took the first minute's p99 from ~730 to ~540 ms but
    # ``ready`` came ~2 s later (docs/bench/appliance-latency.md). The other triggers ignore it.
    warmup_batches: int = 0
    # Micro-batch and real-time: offset/commit logs written in the background
    # (appliance.tuning.ASYNC_PROGRESS). Continuous mode ignores it.
    async_progress: bool = True
    # Continuous: how long without a committed epoch before the query counts as stuck and
    # the appliance exits 1 (appliance.query.epoch_watch); None: the default (stall_timeout_s).
    stall_timeout: str | None = None
    # Query failures caused by a lost executor that are restarted in the same session within
    # ten minutes before the appliance exits 1 for its supervisor (appliance.process.restarts).
    executor_loss_restarts: int = 3

    @field_validator("checkpoint_dir")
    @classmethod
    def _checkpoint_dir(cls, value: str) -> str:
        return _a_path(value)

    @field_validator("trigger")
    @classmethod
    def _trigger(cls, value: str) -> str:
        trigger_mode(value)  # ValueError naming the choices
        return value

    @property
    def mode(self) -> TriggerMode:
        """The trigger mode: everything that differs between the triggers
        (appliance.trigger)."""
        return trigger_mode(self.trigger)

    @field_validator("executor_loss_restarts")
    @classmethod
    def _restarts(cls, value: int) -> int:
        return _within(value, 0, 100, "exit 1 on the first loss")

    @field_validator("warmup_batches")
    @classmethod
    def _warmup_batches(cls, value: int) -> int:
        return _within(value, 0, 100, "no streaming warm-up")

    @field_validator("interval", "stall_timeout", mode="before")
    @classmethod
    def _number_is_seconds(cls, value: object) -> object:
        return _duration_text(value)

    @field_validator("interval", "stall_timeout")
    @classmethod
    def _interval(cls, value: str | None) -> str | None:
        if value is not None:
            interval_ms(value)
        return value

    @model_validator(mode="after")
    def _default_interval(self) -> QueryConfig:
        """No interval configured: the trigger's own default. Set without marking the field
        as set, so ``config_to_toml`` leaves it out and a ``--trigger`` given when that file
        is read again picks the new trigger's own default."""
        if self.interval is None:
            object.__setattr__(self, "interval", self.mode.default_interval)
        return self

    @property
    def trigger_interval(self) -> str:
        """The interval the trigger runs at, in Spark's spelling (``"20s"`` is ``"20
        seconds"`` to Spark): the configured one, else the trigger's own default (which
        ``_default_interval`` has already put in ``interval``)."""
        return spark_interval(self.interval if self.interval is not None
                              else self.mode.default_interval)

    @model_validator(mode="after")
    def _stall_timeout(self) -> QueryConfig:
        """An explicit stall timeout must leave room for a few late epochs: a healthy
        query on a saturated machine committed a few seconds late at worst (measured)."""
        if self.stall_timeout is not None and self.mode.commits_every_interval:
            floor_ms = MIN_STALL_INTERVALS * interval_ms(self.trigger_interval)
            if interval_ms(self.stall_timeout) < max(floor_ms, MIN_STALL_MS):
                raise ValueError(
                    f"stall_timeout must be at least {MIN_STALL_INTERVALS} intervals and "
                    f"{MIN_STALL_MS / 1000:g} s (got {self.stall_timeout!r} with interval "
                    f"{self.interval!r})")
        return self

    @property
    def stall_timeout_s(self) -> float:
        """Seconds without a committed epoch after which a continuous query is stuck."""
        if self.stall_timeout is not None:
            return interval_ms(self.stall_timeout) / 1000.0
        return max(STALL_MIN_S, STALL_INTERVALS * interval_ms(self.trigger_interval) / 1000.0)

    @field_validator("starting_offsets")
    @classmethod
    def _starting(cls, value: str) -> str:
        if value not in ("earliest", "latest"):
            raise ValueError(f"must be one of earliest, latest (got {value!r})")
        return value


class RulesConfig(_Section):
    path: str = "rules.yml"

    @field_validator("path")
    @classmethod
    def _path(cls, value: str) -> str:
        return _a_path(value)


#: The driver's network settings on a cluster: named keys of ``[spark]`` -> Spark confs.
#: Executors connect back to the driver, so on a cluster ``driver_host`` must be an
#: address the workers can reach; fixed ports let a firewall allow exactly those.
DRIVER_CONF_KEYS = {
    "driver_host": "spark.driver.host",
    "driver_bind_address": "spark.driver.bindAddress",
    "driver_port": "spark.driver.port",
    "block_manager_port": "spark.driver.blockManager.port",
}


class SparkConfig(BaseModel):
    """``master``, the driver's network settings, and any ``spark.*`` key, which
    overrides the tuning defaults."""

    model_config = ConfigDict(extra="allow", frozen=True)
    master: str = "local[2]"
    driver_host: str | None = None
    driver_bind_address: str | None = None
    driver_port: int | None = None
    block_manager_port: int | None = None
    # The driver JVM's class-data-sharing archive: "auto" (this machine's, if built by
    # `appliance class-archive build`), "off", or a path (appliance.process.class_archive).
    class_archive: str = "auto"

    @field_validator("class_archive")
    @classmethod
    def _class_archive(cls, value: str) -> str:
        if not value.strip():
            raise ValueError('must be "auto", "off" or the path of an archive')
        return value

    @field_validator("driver_host", "driver_bind_address")
    @classmethod
    def _address(cls, value: str | None) -> str | None:
        if value is not None and not re.match(r"^[A-Za-z0-9.:_-]+$", value):
            raise ValueError(f"must be a host name or IP address (got {value!r})")
        return value

    @field_validator("driver_port", "block_manager_port")
    @classmethod
    def _port(cls, value: int | None) -> int | None:
        return _within(value, 0, 65535, "any free port")

    @field_validator("master")
    @classmethod
    def _master(cls, value: str) -> str:
        if not re.match(r"^(local(\[(\d+|\*)(,\d+)?\])?|spark://\S+|yarn|k8s://\S+)$", value):
            raise ValueError(f"must be local[N], spark://host:port, yarn or k8s://... "
                             f"(got {value!r})")
        return value

    @property
    def conf(self) -> dict[str, str]:
        """The ``spark.*`` keys given literally (they win over everything else)."""
        return {k: str(v) for k, v in (self.model_extra or {}).items()}

    @property
    def driver_conf(self) -> dict[str, str]:
        """The Spark confs of the named driver keys that are set."""
        return {spark_key: str(getattr(self, key)) for key, spark_key in DRIVER_CONF_KEYS.items()
                if getattr(self, key) is not None}


class ConnectorOptions(BaseModel):
    """``[source]`` / ``[sink]``: options of the Kafka reader / writer (``kafka.*`` client
    properties, ``maxOffsetsPerTrigger``...). They win over ``tuning.py``'s, so a deploy
    can state (and an operator override) the exact reader and writer settings in use."""

    model_config = ConfigDict(extra="allow", frozen=True)

    @property
    def options(self) -> dict[str, str]:
        return {k: str(v) for k, v in (self.model_extra or {}).items()}


class MetricsConfig(_Section):
    port: int = 9464
    host: str = "127.0.0.1"
    # In-band alert latency histogram (appliance.observability.alert_latency); off only to
    # measure its cost.
    alert_latency: bool = True
    # Per-rule alert counts are exported for this many rules, those that alerted most
    # (``appliance_rule_alerts_total{rule}``): with thousands of rules, one series each
    # would swamp Prometheus. 0: none. Every rule's counts are on the ``/-/rules/stats``
    # page (``appliance rules stats``).
    top_rules: int = 10

    @field_validator("port")
    @classmethod
    def _port(cls, value: int) -> int:
        return _within(value, 0, 65535, "any free port")

    @field_validator("top_rules")
    @classmethod
    def _top_rules(cls, value: int) -> int:
        return _within(value, 0, 1000, "no per-rule series")


class CpusConfig(_Section):
    # The CPUs the appliance's own processes (the runner and Spark's driver JVM, with a
    # local master its tasks too) keep to for ``after_ready_for`` after ``ready``, leaving
    # the others to a broker on the same host while the JVM compiles its hot code; then
    # every CPU they had again (appliance.process.cpu_affinity). The kernel's notation, as
    # ``taskset -c`` and systemd's ``CPUAffinity=`` take it ("0", "0-2,5"); "" = off.
    after_ready: str = ""
    after_ready_for: str = "20 seconds"

    @field_validator("after_ready")
    @classmethod
    def _cpus(cls, value: str) -> str:
        parse_cpu_list(value)  # ValueError naming the notation
        return value

    @field_validator("after_ready_for", mode="before")
    @classmethod
    def _number_is_seconds(cls, value: object) -> object:
        return _duration_text(value)

    @field_validator("after_ready_for")
    @classmethod
    def _for(cls, value: str) -> str:
        if not 1000 <= interval_ms(value) <= 600_000:
            raise ValueError(f"must be 1 second .. 10 minutes (got {value!r})")
        return value

    @property
    def kept(self) -> frozenset[int]:
        """The CPUs to keep to after ``ready`` (empty: off)."""
        return parse_cpu_list(self.after_ready)

    @property
    def kept_s(self) -> float:
        return interval_ms(self.after_ready_for) / 1000.0


# ``[ha]``: the shortest session timeout that still outlasts a few heartbeats and a busy
# machine's hiccups (the embedded broker accepts it: its group.min.session.timeout.ms is
# set to this; a site's Kafka accepts 6 s and more by default, and a shorter session it
# refuses is exit 2, ``appliance.ha.session_bounds``), and the largest that still means
# "seconds".
HA_SESSION_MIN_MS = 1_000
HA_SESSION_MAX_MS = 60_000
_HA_NAME = re.compile(r"^[A-Za-z0-9._-]{1,200}$")


class HaConfig(_Section):
    """An active/standby pair (appliance.ha): on when ``group`` is set. The instances of
    one pair share the group; the one Kafka assigns the control topic serves."""

    # The Kafka consumer group the pair elects its active instance in, and commits the
    # events topic's processed offsets to; None: a single instance, as without [ha].
    group: str | None = None
    # How long an instance that stopped heartbeating (kill -9, SIGSTOP, host or network
    # lost) stays the active one before its partner takes over: most of the wait after a
    # crash. 2 s: four heartbeats (a member heartbeats from a thread of its own, outside
    # the JVM and its GC pauses), within 5 s with the query's start; a site's Kafka wants
    # 6 s or more unless its group.min.session.timeout.ms says otherwise.
    session_timeout: str = "2 seconds"
    # This instance's name in the pair and its checkpoint folder beneath
    # [query] checkpoint_dir; None: "<host name>-<metrics port>".
    instance: str | None = None
    # A waiting standby runs the warm-up again this often, so the query's code stays
    # compiled and the sink's producer connected; 0: only the warm-up before it joins.
    rewarm_every: str = "10 minutes"

    @field_validator("group", "instance")
    @classmethod
    def _name(cls, value: str | None) -> str | None:
        if value is not None and not _HA_NAME.match(value):
            raise ValueError(f"must be 1-200 characters of [A-Za-z0-9._-] (got {value!r})")
        return value

    @field_validator("session_timeout", "rewarm_every", mode="before")
    @classmethod
    def _number_is_seconds(cls, value: object) -> object:
        return _duration_text(value)

    @field_validator("rewarm_every")
    @classmethod
    def _rewarm(cls, value: str) -> str:
        ms = interval_ms(value)
        if ms != 0 and not 10_000 <= ms <= 86_400_000:
            raise ValueError(f"must be 10 seconds .. 24 hours, 0 = off (got {value!r})")
        return value

    @property
    def rewarm_s(self) -> float | None:
        """Seconds between a standby's warm-ups; None: off."""
        ms = interval_ms(self.rewarm_every)
        return ms / 1000.0 if ms else None

    @field_validator("session_timeout")
    @classmethod
    def _session(cls, value: str) -> str:
        if not HA_SESSION_MIN_MS <= interval_ms(value) <= HA_SESSION_MAX_MS:
            raise ValueError(f"must be {HA_SESSION_MIN_MS // 1000} to "
                             f"{HA_SESSION_MAX_MS // 1000} seconds (got {value!r})")
        return value

    @property
    def enabled(self) -> bool:
        return self.group is not None

    @property
    def session_timeout_ms(self) -> int:
        return int(interval_ms(self.session_timeout))


class Config(_Section):
    kafka: KafkaConfig = KafkaConfig()
    topics: TopicsConfig = TopicsConfig()
    query: QueryConfig = QueryConfig()
    rules: RulesConfig = RulesConfig()
    spark: SparkConfig = SparkConfig()
    source: ConnectorOptions = ConnectorOptions()
    sink: ConnectorOptions = ConnectorOptions()
    metrics: MetricsConfig = MetricsConfig()
    cpus: CpusConfig = CpusConfig()
    ha: HaConfig = HaConfig()

    @field_validator("spark")
    @classmethod
    def _spark_keys(cls, value: SparkConfig) -> SparkConfig:
        for key in value.conf:
            if not key.startswith("spark."):
                named = list(SparkConfig.model_fields)
                meant = difflib.get_close_matches(key.lower(), named, n=1, cutoff=0.7)
                hint = f"did you mean {meant[0]}? " if meant else ""
                raise ValueError(f"unknown key {key!r} ({hint}only master, "
                                 f"{', '.join(DRIVER_CONF_KEYS)}, class_archive and "
                                 f"spark.* keys)")
        for key, spark_key in DRIVER_CONF_KEYS.items():
            if getattr(value, key) is not None and spark_key in value.conf:
                raise ValueError(f"{key} and {spark_key!r} both set: keep one")
        return value

    @field_validator("source")
    @classmethod
    def _source_properties(cls, value: ConnectorOptions) -> ConnectorOptions:
        _refuse_properties(value.model_extra or {}, SOURCE_SECTION)
        return value

    @field_validator("sink")
    @classmethod
    def _sink_properties(cls, value: ConnectorOptions) -> ConnectorOptions:
        _refuse_properties(value.model_extra or {}, SINK_SECTION)
        return value

    @model_validator(mode="after")
    def _interval_for_trigger(self) -> Config:
        """Spark refuses some intervals for some triggers (real-time batches shorter than
        its minimum); say so up front."""
        problem = self.query.mode.interval_problem(self.query.trigger_interval,
                                                   self.spark.conf)
        if problem is not None:
            raise PydanticCustomError("trigger_interval", f"query.interval: {problem}")
        return self


def _sections() -> list[Section]:
    """The sections as ``appliance.overrides`` needs them (own keys; pass-through or not)."""
    sections = []
    for name, field in Config.model_fields.items():
        model = field.annotation
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            raise TypeError(f"Config.{name} is not a section model: {model!r}")
        sections.append(Section(name, frozenset(model.model_fields),
                                model.model_config.get("extra") == "allow"))
    return sections


#: Spark conf names of the ``[spark]`` keys the appliance names itself: an override that
#: spells one the Spark way (``--conf spark.driver.host=...``) sets the named key.
SPARK_NAMED_KEYS = {"spark.master": "master",
                    **{spark_key: key for key, spark_key in DRIVER_CONF_KEYS.items()}}


def _apply(data: dict[str, Any], overrides: list[Override]) -> dict[tuple[str, str], str]:
    """Apply ``overrides`` in order (a later one wins); where each key came from."""
    origins = {}
    for override in overrides:
        section, key = override.section, override.key
        values = data.setdefault(section, {})
        if section == "spark":
            key = SPARK_NAMED_KEYS.get(key, key)
            for spelling in (k for k, named in SPARK_NAMED_KEYS.items() if named == key):
                values.pop(spelling, None)  # the file's other spelling of the same setting
        values[key] = override.value
        origins[(section, key)] = override.origin
    return origins


class PathKey(NamedTuple):
    """A config value that is a file or directory path, unless it is one of ``words``."""

    section: str
    key: str
    words: frozenset[str] = frozenset()


PATH_KEYS = (
    PathKey("rules", "path"),
    PathKey("query", "checkpoint_dir"),
    PathKey("spark", "class_archive", frozenset({ARCHIVE_AUTO, ARCHIVE_OFF})),
)


def _resolve_paths(data: dict[str, Any], base: Path) -> None:
    """Relative paths in the file (and their defaults) are relative to the file, not to
    the caller's cwd, so ``appliance run --config /etc/appliance/appliance.toml`` finds
    the rules next to it."""
    for path_key in PATH_KEYS:
        if not isinstance(data.get(path_key.section, {}), dict):
            continue
        default = getattr(Config.model_fields[path_key.section].default, path_key.key)
        value = data.setdefault(path_key.section, {}).setdefault(path_key.key, default)
        if isinstance(value, str) and value.strip() and value not in path_key.words \
                and not os.path.isabs(value):
            data[path_key.section][path_key.key] = str(base / value)


class Problem(NamedTuple):
    """One thing wrong with a config: in which file, which key, and what; ``line()`` is
    what the CLI prints."""

    source: str  # the file as the operator named it
    key: str  # "query.trigger"; "" when the message names what it is about
    message: str
    origin: str | None = None  # the variable or flag that set the value, if not the file
    env: str | None = None  # the variable that would set this key

    def line(self, env_hint: bool = False) -> str:
        """``appliance.toml: query.trigger: must be ...``; with ``env_hint``, the variable
        that sets the key is named too (``appliance config check``)."""
        if not self.key:
            return f"{self.source}: {self.message}"
        where = f"{self.key} (from {self.origin})" if self.origin else self.key
        hint = f" (env: {self.env})" if env_hint and self.env and not self.origin else ""
        return f"{self.source}: {where}: {self.message}{hint}"


def _env_of(section: str, key: str) -> str | None:
    """The ``APPLIANCE_<SECTION>_<KEY>`` variable that sets ``[section] key``."""
    field = Config.model_fields.get(section)
    model = field.annotation if field is not None else None
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        return None
    if key in model.model_fields:
        return env_name(section, key, passthrough=False)
    if model.model_config.get("extra") == "allow":
        return env_name(section, key, passthrough=True)
    return None


def _problem(source: str, error: Any, origins: dict[tuple[str, str], str]) -> Problem:
    """One pydantic error as a Problem."""
    loc = ".".join(str(p) for p in error["loc"])
    msg = error["msg"].removeprefix("Value error, ")
    if error["type"] in ("kafka_security", "kafka_property"):  # "kafka.x: must be ..."
        return Problem(source, "", f"{loc}.{msg}")
    if error["type"] == "trigger_interval":  # "query.interval: ..."
        return Problem(source, "", msg)
    where = [str(p) for p in error["loc"][:2]]
    origin = origins.get((where[0], where[1])) if len(where) == 2 else None
    if error["type"] == "extra_forbidden":
        return Problem(source, loc, _unknown(where, origin), origin)
    msg = _IN_WORDS.get(error["type"], msg)
    if error["type"] not in ("value_error",) and "input" in error:
        msg = f"{msg} (got {error['input']!r})"
    if len(where) != 2:
        return Problem(source, loc, msg)
    return Problem(source, loc, msg, origin, _env_of(*where))


#: pydantic's type errors in the words of the file (``must be an integer (got 'x')``).
_IN_WORDS = {
    "int_parsing": "must be an integer",
    "int_type": "must be an integer",
    "int_from_float": "must be a whole number",
    "bool_parsing": "must be true or false",
    "bool_type": "must be true or false",
    "string_type": "must be a string",
    "float_parsing": "must be a number",
    "float_type": "must be a number",
}


def _unknown(where: list[str], origin: str | None) -> str:
    """``unknown section``/``unknown key``, with the name most likely meant (as the
    variable that sets it, when a variable set the unknown one)."""
    if len(where) == 1:
        names, what = list(Config.model_fields), "section"
    else:
        field = Config.model_fields.get(where[0])
        model = field.annotation if field is not None else None
        names = list(model.model_fields) if isinstance(model, type) and issubclass(
            model, BaseModel) else []
        what = "key"
    match = difflib.get_close_matches(where[-1].lower(), names, n=1, cutoff=0.7)
    if not match:
        return f"unknown {what} (the {what}s: {', '.join(names)})"
    meant = match[0]
    if origin is not None and origin.startswith("APPLIANCE_") and len(where) == 2:
        meant = _env_of(where[0], meant) or meant
    elif len(where) == 1:
        meant = f"[{meant}]"
    return f"unknown {what} (did you mean {meant}?)"


#: The sections whose keys are Kafka's (all of them, or the ``kafka.`` ones).
_KAFKA_SECTIONS = (("kafka", KAFKA_SECTION), ("source", SOURCE_SECTION),
                   ("sink", SINK_SECTION))


def _property_problems(source: str, data: dict[str, Any],
                       origins: dict[tuple[str, str], str]) -> list[Problem]:
    """Every Kafka property no client would read (``appliance.kafka_properties``), each
    taken out of ``data`` so that the rest is still checked; an unknown key set by a
    variable is answered with the variable that was meant."""
    out = []
    for section, names in _KAFKA_SECTIONS:
        values = data.get(section)
        if not isinstance(values, dict):
            continue
        for found in check_properties(values, names):
            del values[found.key]
            origin = origins.get((section, found.key))
            out.append(Problem(source, f"{section}.{found.key}",
                               found.said(_as_variable(section, found, origin)), origin))
    return out


def _as_variable(section: str, found: PropertyProblem, origin: str | None) -> str | None:
    """The variable that sets the suggested key, when a variable set the wrong one."""
    if origin is None or not origin.startswith("APPLIANCE_") or found.suggestion is None \
            or found.suggestion.startswith("["):
        return None
    return _env_of(section, found.suggestion)


def _one_line(source: str, err: ValidationError,
              origins: dict[tuple[str, str], str]) -> str:
    return _problem(source, err.errors()[0], origins).line()


def check_config(path: str | os.PathLike | None = None,
                 environ: dict[str, str] | None = None, trigger: str | None = None,
                 conf: list[Override] | None = None, text: str | None = None,
                 label: str | None = None) -> tuple[Config | None, list[Problem]]:
    """The config ``load_config`` would start with, and every problem found on the way
    (a config only when there is none).

    ``text``: the file's contents, read elsewhere (stdin); relative paths in it are then
    relative to the working directory. ``label``: how problems name the file.
    """
    environ = dict(os.environ if environ is None else environ)
    explicit = path is not None
    file = Path(DEFAULT_CONFIG_FILE if path is None else path)
    source = label or str(file)
    data: dict[str, Any] = {}
    if text is not None:
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            return None, [Problem(source, "", f"not valid TOML: {exc}")]
    elif file.is_file():
        try:
            data = read_toml(file, ConfigError)
        except ConfigError as exc:
            return None, [Problem(source, "", str(exc).removeprefix(f"{file}: "))]
    elif explicit:
        return None, [Problem(source, "", "file not found")]
    problems = []
    for section, value in list(data.items()):
        if section in Config.model_fields and not isinstance(value, dict):
            problems.append(Problem(source, section, f"must be a table [{section}]"))
            del data[section]
    if text is not None:
        _resolve_paths(data, Path.cwd())
    elif file.is_file():
        _resolve_paths(data, file.resolve().parent)
    problems += [Problem(source, "", stray.line())
                 for stray in stray_variables(environ, _sections())]
    origins = _apply(data, [*from_environ(environ, _sections()), *(conf or ())])
    problems += _property_problems(source, data, origins)
    if trigger is not None:
        data.setdefault("query", {})["trigger"] = trigger
    try:
        config = Config.model_validate(data)
    except ValidationError as exc:
        return None, problems + [_problem(source, e, origins) for e in exc.errors()]
    return (None if problems else config), problems


def load_config(path: str | os.PathLike | None = None,
                environ: dict[str, str] | None = None, trigger: str | None = None,
                conf: list[Override] | None = None) -> Config:
    """Read ``path`` (default ``appliance.toml`` if it exists), apply env overrides, validate.

    An explicit path that does not exist is an error; the implicit default may be absent
    (then built-in defaults apply). ``conf`` (the CLI's ``--conf``, see
    ``appliance.overrides``) wins over both, and ``trigger`` (``--trigger``) over all.
    ConfigError: the first problem ``check_config`` finds, as one line.
    """
    config, problems = check_config(path, environ, trigger, conf)
    if config is None:
        raise ConfigError(problems[0].line())
    return config


_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def _toml_key(key: str) -> str:
    """``master`` stays bare; ``spark.executor.memory`` is quoted (a dotted bare key would
    be a nested table)."""
    return key if _BARE_KEY.match(key) else _toml_string(key)


def _toml_string(text: str) -> str:
    # A JSON string is a TOML basic string (same escapes), except that TOML also wants DEL
    # escaped; ensure_ascii=False: TOML forbids the surrogate escapes JSON uses otherwise.
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def _toml_value(where: str, value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float) and value == value and abs(value) != float("inf"):
        return repr(value)
    if isinstance(value, str):
        return _toml_string(value)
    raise TypeError(f"{where}: cannot write {value!r} to appliance.toml")


def config_to_toml(config: Config) -> str:
    """``appliance.toml`` text that ``load_config`` reads back to an equal ``Config``.

    Only what was set is written (as an operator writes the file): a trigger without an
    ``interval`` keeps the trigger's own default, so ``--trigger`` still picks the new
    trigger's default. Paths are written as given; ``load_config`` resolves relative ones
    against the file's directory.
    """
    lines: list[str] = []
    for section, values in config.model_dump(exclude_unset=True, exclude_none=True).items():
        lines.append(f"[{section}]")
        lines += [f"{_toml_key(key)} = {_toml_value(f'{section}.{key}', value)}"
                  for key, value in values.items()]
    return "\n".join(lines) + "\n"


def write_config(config: Config, path: str | os.PathLike) -> Path:
    """Write ``config`` to ``path`` (replaced if it exists), readable by its owner only:
    ``[kafka]`` may hold client credentials."""
    path = Path(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)  # an existing file too
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(config_to_toml(config))
    return path
