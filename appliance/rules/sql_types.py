"""Spark SQL's types as the rules check needs them: a kind per type, and type names read.

Kinds are coarse (``numeric`` for every number type, ``map``, ``array``...) because that
is what decides the analyzer's verdicts on a rule with ANSI mode off. A leaf module: the
rules check (``appliance.rules.rule_types``) and the generator of Spark's function table
(``scripts/spark_functions.py``) both read it.
"""

from __future__ import annotations

from dataclasses import dataclass

BOOLEAN, NUMERIC, STRING, BINARY = "boolean", "numeric", "string", "binary"
DATE, TIMESTAMP, INTERVAL = "date", "timestamp", "interval"
MAP, ARRAY, STRUCT, NULL, ANY = "map", "array", "struct", "null", "any"
VARIANT, LAMBDA, OTHER = "variant", "lambda", "other"
_INTEGRAL = ("tinyint", "smallint", "int", "bigint")
#: Kinds Spark turns into a string where a string is wanted (ANSI off).
TEXTUAL = (STRING, NUMERIC, BOOLEAN, DATE, TIMESTAMP, BINARY, NULL, ANY)


@dataclass(frozen=True)
class SqlType:
    kind: str
    name: str                      # Spark's spelling (``double``, ``map<string,string>``)
    key: SqlType | None = None     # a map's
    value: SqlType | None = None   # a map's
    element: SqlType | None = None  # an array's
    #: A string's collation given by COLLATE (``unicode_ci``: canonical, lower case), which
    #: Spark holds against any other explicit one it meets; None for the default.
    collation: str | None = None

    @property
    def integral(self) -> bool:
        return self.name in _INTEGRAL

    @property
    def interval_family(self) -> str | None:
        """``year-month`` or ``day-time`` for an ANSI interval type (``interval day``), else
        None (not an interval, or a literal whose family is not known here)."""
        if self.kind != INTERVAL or self.name == INTERVAL:
            return None
        return "year-month" if self.name.split()[1] in ("year", "month") else "day-time"


def of_kind(kind: str, name: str | None = None) -> SqlType:
    return SqlType(kind, name or kind)


T_BOOLEAN = of_kind(BOOLEAN)
T_STRING = of_kind(STRING)
T_DOUBLE = of_kind(NUMERIC, "double")
T_INT = of_kind(NUMERIC, "int")
T_BIGINT = of_kind(NUMERIC, "bigint")
T_NULL = of_kind(NULL, "void")
T_ANY = of_kind(ANY)


def kind_of_spark_type(name: str) -> str:
    """The kind of a Spark type by its ``simpleString`` (``decimal(10,2)`` -> numeric)."""
    return parse_type(name).kind if name else OTHER


def parse_type(name: str) -> SqlType:
    """A Spark type name (``int``, ``map<string,string>``, ``array<double>``) as a type."""
    name = name.strip().lower()
    base = name.split("(")[0].split("<")[0]
    if base == "map" and name.startswith("map<"):
        key, value = _split_pair(name[4:-1])
        return SqlType(MAP, name, key=parse_type(key), value=parse_type(value))
    if base == "array" and name.startswith("array<"):
        return SqlType(ARRAY, name, element=parse_type(name[6:-1]))
    if base == "struct":
        return SqlType(STRUCT, name)
    simple = {
        "boolean": BOOLEAN, "tinyint": NUMERIC, "byte": NUMERIC, "smallint": NUMERIC,
        "short": NUMERIC, "int": NUMERIC, "integer": NUMERIC, "bigint": NUMERIC,
        "long": NUMERIC, "float": NUMERIC, "real": NUMERIC, "double": NUMERIC,
        "decimal": NUMERIC, "dec": NUMERIC, "numeric": NUMERIC, "string": STRING,
        "varchar": STRING, "char": STRING, "binary": BINARY, "date": DATE,
        "timestamp": TIMESTAMP, "timestamp_ntz": TIMESTAMP, "timestamp_ltz": TIMESTAMP,
        "void": NULL, "variant": VARIANT, "interval": INTERVAL,
    }.get(base)
    if simple is None and base.startswith("interval"):
        simple = INTERVAL
    canonical = {"integer": "int", "long": "bigint", "short": "smallint", "byte": "tinyint",
                 "real": "float"}.get(base, name)
    return SqlType(simple or OTHER, canonical)


def _split_pair(inner: str) -> tuple[str, str]:
    depth = 0
    for i, c in enumerate(inner):
        if c == "<":
            depth += 1
        elif c == ">":
            depth -= 1
        elif c == "," and depth == 0:
            return inner[:i], inner[i + 1:]
    return inner, "string"




#: The kinds the function table's argument probes tell apart (``scripts/spark_functions.py``).
PROBE_KINDS = ("null", "string", "double", "int", "boolean", "map", "array", "date",
               "timestamp", "binary")


def probe_kind(t: SqlType) -> str | None:
    """``t`` as one of ``PROBE_KINDS`` (None: a kind the probes did not try)."""
    if t.kind == NUMERIC:
        return "int" if t.integral else "double"
    return t.kind if t.kind in PROBE_KINDS else None
