"""Write appliance/rules/spark_collations.py: the collations the installed Spark knows.

The rules check (``appliance rules check``) answers without a JVM, so it needs Spark's own
list of collation names for ``COLLATE``: the locales (``UNICODE``, ``en``, ``sr_Cyrl_SRB``...)
that take the case, accent and trailing-space modifiers (``_CI``, ``_AI``, ``_RTRIM``), and
the built-in ``UTF8_BINARY`` and ``UTF8_LCASE``. This asks the installed pyspark once
(``SHOW COLLATIONS``, seconds) and writes the list as Python data;
``tests/appliance/test_rule_check_corpus.py`` holds it against the installed Spark:

    .venv/bin/python scripts/spark_collations.py
"""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import SparkSession

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "appliance" / "rules" / "spark_collations.py"

HEADER = '''"""The collations of Spark {version}, as ``SHOW COLLATIONS`` lists them (generated).

Written by ``scripts/spark_collations.py``. ``LOCALES``: the names that take the modifiers
``_CS``/``_CI`` (case), ``_AS``/``_AI`` (accents) and ``_RTRIM`` (trailing spaces), each at
most once, in any order; ``BUILT_IN``: the names that take only ``_RTRIM``. Spark reads
every name case-insensitively. ``appliance.rules.rule_types`` reads it.
"""

from __future__ import annotations

SPARK_VERSION = {version!r}
BUILT_IN: tuple[str, ...] = {built_in!r}
LOCALES: tuple[str, ...] = (
'''


def base_names(spark: SparkSession) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(built-in names, locale names): every collation without modifiers."""
    rows = spark.sql("SHOW COLLATIONS").collect()
    built_in = tuple(r.NAME for r in rows if r.NAME.upper().startswith("UTF8_")
                     and r.PAD_ATTRIBUTE == "NO_PAD")
    locales = tuple(r.NAME for r in rows if not r.NAME.upper().startswith("UTF8_")
                    and (r.CASE_SENSITIVITY, r.ACCENT_SENSITIVITY, r.PAD_ATTRIBUTE)
                    == ("CASE_SENSITIVE", "ACCENT_SENSITIVE", "NO_PAD"))
    return built_in, locales


def main() -> None:
    spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false") \
        .getOrCreate()
    built_in, locales = base_names(spark)
    text = HEADER.format(version=spark.version, built_in=built_in)
    text += "".join(f"    {name!r},\n" for name in locales) + ")\n"
    OUT.write_text(text)
    print(f"wrote {OUT}: {len(built_in)} built-in names, {len(locales)} locales")
    spark.stop()


if __name__ == "__main__":
    main()
