"""Write appliance/rules/spark_functions.py: what the installed Spark says of its functions.

The rules check (``appliance rules check``) answers without a JVM, so it needs Spark's own
view of every built-in function: its name, its group (aggregate, window, generator...),
the argument counts it accepts, whether it is deterministic, and the kind of value it
returns when that does not depend on the arguments. This asks the installed pyspark once
(a local session; about half an hour: a few dozen analyses per function) and writes the table as
Python data. ``tests/appliance/test_rule_check_corpus.py`` checks the table against the
installed Spark (names and groups), so a pyspark upgrade that changes them fails a test
until this is run again:

    .venv/bin/python scripts/spark_functions.py
"""

from __future__ import annotations

import logging
import re
import sys
from pathlib import Path

from pyspark.sql import SparkSession

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from appliance.events import EVENT_DDL  # noqa: E402
from appliance.rules.sql_types import kind_of_spark_type  # noqa: E402

OUT = ROOT / "appliance" / "rules" / "spark_functions.py"
#: Argument counts probed: 0..MAX_ARGS; a function accepting MAX_ARGS takes any number more.
MAX_ARGS = 6
#: Arguments of one kind each probe passes (a function's result kind is fixed if every
#: probe that analyses agrees on it).
PROBES = ("NULL", "'x'", "1.5D", "2", "tags", "array('x')")
#: A column's value of each kind (not a constant): a position that takes the kind as a
#: literal but refuses it as this takes only constants (``round``'s scale).
COLUMN_PROBES = {"string": "metric", "double": "value", "int": "CAST(value AS INT)",
                 "boolean": "value > 0", "map": "tags", "array": "array(metric)",
                 "date": "to_date(metric)",
                 "timestamp": "timestamp_millis(CAST(ts AS BIGINT))",
                 "binary": "CAST(metric AS BINARY)"}
#: One argument of each kind the rules check tells apart, by its name there
#: (``appliance.rules.sql_types.probe_kind``): which of them each argument position takes.
KIND_PROBES = {"null": "NULL", "string": "'x'", "double": "1.5D", "int": "2",
               "boolean": "true", "map": "tags", "array": "array('x')",
               "date": "DATE'2024-01-01'", "timestamp": "TIMESTAMP'2024-01-01 00:00:00'",
               "binary": "X'01'"}
_NAME = re.compile(r"^[a-z_][a-z0-9_]*$")

HEADER = '''"""Spark's built-in functions, as the installed pyspark has them (generated).

Written by ``scripts/spark_functions.py`` from Spark {version}: per function its group
(``agg_funcs``, ``window_funcs``, ``generator_funcs``... or None for table functions), the
argument counts it accepts among 0..{max_args} (``ANY_MORE``: {max_args} and any number
more), whether it is deterministic, and the kind of value it returns where that does not
depend on its arguments (None: it does). ``appliance.rules.rule_types`` reads it.
"""

from __future__ import annotations

from typing import NamedTuple

#: In ``SparkFunction.arities``: the function also takes any number of arguments above the
#: largest count listed.
ANY_MORE = -1
SPARK_VERSION = {version!r}


class SparkFunction(NamedTuple):
    group: str | None
    arities: tuple[int, ...]
    deterministic: bool
    returns: str | None
    # Per argument count (up to 3), per position: the kinds of argument Spark accepted there
    # with NULL in every other position (``appliance.rules.sql_types.probe_kind``), and
    # "constant" where it took them only as literals; a count whose all-NULL call Spark
    # refuses is absent (nothing known).
    accepts: dict[int, tuple[tuple[str, ...], ...]] = {{}}


FUNCTIONS: dict[str, SparkFunction] = {{
'''


def _wrong_count(message: str) -> bool:
    return "WRONG_NUM_ARGS" in message or "INVALID_NUM_ARGS" in message


#: Argument counts whose positions are probed (every kind at every position).
MAX_PROBED_POSITIONS = 3


def _analyses(events, call: str) -> bool:
    try:
        events.selectExpr(f"{call} AS r")
        return True
    except Exception:  # noqa: BLE001 - a refusal is the answer
        return False


def accepts(events, name: str, arities: tuple[int, ...]) -> dict[int, tuple[tuple[str, ...], ...]]:
    out: dict[int, tuple[tuple[str, ...], ...]] = {}
    for count in arities:
        if count < 1 or count > MAX_PROBED_POSITIONS:
            continue
        if not _analyses(events, f"{name}({', '.join(['NULL'] * count)})"):
            continue
        positions = []
        for position in range(count):
            kinds = []
            for kind, literal in KIND_PROBES.items():
                args = ["NULL"] * count
                args[position] = literal
                if kind == "null" or _analyses(events, f"{name}({', '.join(args)})"):
                    kinds.append(kind)
            columns = []
            for kind in kinds:
                if kind in COLUMN_PROBES:
                    args = ["NULL"] * count
                    args[position] = COLUMN_PROBES[kind]
                    columns.append(_analyses(events, f"{name}({', '.join(args)})"))
            if columns and not any(columns):
                kinds.append("constant")
            positions.append(tuple(kinds))
        out[count] = tuple(positions)
    return out


def probe(spark: SparkSession, events, name: str) -> tuple[tuple[int, ...], bool, str | None]:
    arities: list[int] = []
    kinds: set[str] = set()
    deterministic = True
    for count in range(MAX_ARGS + 1):
        accepted = False
        for arg in PROBES:
            if count == 0 and arg != PROBES[0]:
                break
            try:
                df = events.selectExpr(f"{name}({', '.join([arg] * count)}) AS r")
            except Exception as exc:  # noqa: BLE001 - every analysis error is an answer
                if _wrong_count(str(exc)):
                    break
                accepted = True  # the count is right, the argument kind is not
                continue
            accepted = True
            expression = df._jdf.queryExecution().analyzed().expressions().head()
            deterministic = deterministic and bool(expression.deterministic())
            kinds.add(kind_of_spark_type(str(df._jdf.schema().apply("r").dataType().simpleString())))
        if accepted:
            arities.append(count)
    if MAX_ARGS in arities:
        arities.append(-1)
    kinds.discard("null")
    returns = kinds.pop() if len(kinds) == 1 else None
    return tuple(arities), deterministic, returns


def main() -> int:
    spark = (SparkSession.builder.master("local[1]").appName("spark-functions")
             .config("spark.ui.enabled", "false").config("spark.sql.ansi.enabled", "false")
             .getOrCreate())
    spark.sparkContext.setLogLevel("OFF")
    logging.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL)
    jvm = spark.sparkContext._jvm
    registry = jvm.org.apache.spark.sql.catalyst.analysis.FunctionRegistry.expressions()
    events = spark.createDataFrame([], EVENT_DDL)
    names = sorted({r.function for r in spark.sql("SHOW SYSTEM FUNCTIONS").collect()
                    if _NAME.match(r.function)})
    lines = [HEADER.format(version=spark.version, max_args=MAX_ARGS)]
    for i, name in enumerate(names, 1):
        entry = registry.get(name)
        group = str(entry.get()._1().getGroup()) or None if entry.isDefined() else None
        arities, deterministic, returns = probe(spark, events, name)
        taken = accepts(events, name, arities) if group not in (None, "agg_funcs",
                                                                 "window_funcs") else {}
        lines.append(f"    {name!r}: SparkFunction({group!r}, {arities!r}, {deterministic!r}, "
                     f"{returns!r}, {taken!r}),\n")
        if i % 50 == 0:
            print(f"spark_functions: {i}/{len(names)}", file=sys.stderr, flush=True)
    lines.append("}\n")
    OUT.write_text("".join(lines))
    print(f"spark_functions: wrote {len(names)} functions to {OUT.relative_to(ROOT)}")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
