"""``appliance rules check`` against Spark's analyzer on a corpus of broken and tricky rules.

The check answers without a JVM (``appliance.rules.rule_types``); the running appliance
compiles the same rules with Spark at start-up and reload (``rule_book.compile_rules``),
after the same check. For the check to give the running appliance's verdict, Spark must
accept every rule the check accepts; where the check refuses what Spark alone would take,
the corpus says why (``stricter``). ``data/rules_corpus.yml`` holds the cases and what the
check says of each; the Spark half runs them all through one compilation, as the appliance
does, so a broken rule among many is found by halving and named with Spark's message.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from appliance.rules.rule_types import check
from appliance.rules.rules_file import (
    MAX_FILE_BYTES,
    MAX_RULES,
    MAX_WHEN_CHARS,
    Rule,
    RulesError,
    RuleSet,
    load_rule_set,
    parse_rules,
)

CORPUS = yaml.safe_load((Path(__file__).parent / "data" / "rules_corpus.yml").read_text())
CASES = CORPUS["cases"]


def _id(case: dict) -> str:
    return case["when"][:60]


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_the_check_says_what_the_corpus_records(case):
    problems = check(case["when"])
    if case["verdict"] == "ok":
        assert problems == [], problems
    else:
        assert problems, f"accepted: {case['when']!r}"
        assert any(case["says"] in p for p in problems), problems


def _rules_file(rules: list[dict]) -> str:
    return yaml.safe_dump({"rules": rules})


def test_ten_thousand_rules_with_one_broken_is_one_line(tmp_path):
    rules = [{"id": f"r{i}", "severity": "info", "when": f"metric = 'm{i % 200}' AND "
              f"value >= {i % 97}"} for i in range(10_000)]
    rules[7_777]["when"] = "metric = 'm1' AND value >= nope(1)"
    path = tmp_path / "rules.yml"
    path.write_text(_rules_file(rules))
    with pytest.raises(RulesError) as err:
        load_rule_set(path)
    assert err.value.problems == [f"{path}: rule 'r7777': when: unknown function 'nope'"]


@pytest.mark.parametrize("shape, expected", [
    ("count", f"rules: {MAX_RULES * 5} rules; at most {MAX_RULES}"),
    ("long-when", f"rule 'big': when: {10 * 1024 * 1024} characters; at most {MAX_WHEN_CHARS}"),
    ("duplicates", "rule 'same': id: duplicate"),
])
def test_oversized_and_duplicate_rules_are_one_line_each(tmp_path, shape, expected):
    if shape == "count":
        text = "rules:\n" + "".join(f"  - {{id: r{i}, severity: info, when: 'value > 1'}}\n"
                                    for i in range(MAX_RULES * 5))
    elif shape == "long-when":
        text = _rules_file([{"id": "big", "severity": "info",
                             "when": "value > 1 " + "x" * (10 * 1024 * 1024 - 10)}])
    else:
        text = _rules_file([{"id": "same", "severity": "info", "when": "value > 1"},
                            {"id": "same", "severity": "info", "when": "value > 2"}])
    with pytest.raises(RulesError) as err:
        parse_rules(text, "big.yml")
    assert err.value.problems == [f"big.yml: {expected}"]


def test_a_file_over_the_size_bound_is_refused_before_it_is_read(tmp_path):
    path = tmp_path / "huge.yml"
    with path.open("wb") as out:
        out.truncate(MAX_FILE_BYTES + 1)
    with pytest.raises(RulesError) as err:
        load_rule_set(path)
    assert err.value.problems == [f"{path}: {MAX_FILE_BYTES + 1} bytes; a rules file holds "
                                  f"at most {MAX_FILE_BYTES}"]


# -- held against Spark -----------------------------------------------------------------

def _spark_verdicts(spark, whens: list[str]) -> dict[int, str]:
    """Spark's problem per rule (by position), from ONE compilation of all of them."""
    from appliance.rules.rule_book import compile_rules

    rules = RuleSet(tuple(Rule(f"c{i}", "info", w, "m") for i, w in enumerate(whens)), "v",
                    "corpus.yml")
    try:
        compile_rules(spark, rules)
    except RulesError as exc:
        return {int(p.split("rule 'c")[1].split("'")[0]): p.split("when: ", 1)[1]
                for p in exc.problems}
    return {}


@pytest.mark.spark
def test_spark_accepts_every_rule_the_check_accepts_and_refuses_the_rest(sql_spark):
    refused = _spark_verdicts(sql_spark, [c["when"] for c in CASES])
    disagreements = []
    for i, case in enumerate(CASES):
        fast_ok = not check(case["when"])
        spark_ok = i not in refused
        if fast_ok and not spark_ok:
            disagreements.append(f"check accepts, Spark refuses: {case['when']!r}: "
                                 f"{refused[i]}")
        elif not fast_ok and spark_ok and "stricter" not in case:
            disagreements.append(f"check refuses, Spark accepts (not marked stricter): "
                                 f"{case['when']!r}")
        elif not fast_ok and not spark_ok and "stricter" in case:
            disagreements.append(f"marked stricter, but Spark refuses too: {case['when']!r}")
    assert disagreements == []


@pytest.mark.spark
def test_spark_finds_the_one_broken_rule_among_ten_thousand(sql_spark):
    whens = [f"metric = 'm{i % 200}' AND value >= {i % 97}" for i in range(10_000)]
    whens[4_321] = "weekofyear(value) = 1"   # only types tell: the check's probes, Spark
    refused = _spark_verdicts(sql_spark, whens)
    assert list(refused) == [4_321]
    assert refused[4_321].startswith("[DATATYPE_MISMATCH")


@pytest.mark.spark
def test_spark_gives_each_rule_the_same_verdict_wherever_its_chunk_falls(sql_spark):
    """Spark compiles the rules in projections of ``RuleCompiler.CHUNK`` (500), side by side:
    the corpus spread over several of them, each case between good rules, is refused rule
    for rule with the same messages as the corpus alone."""
    alone = _spark_verdicts(sql_spark, [c["when"] for c in CASES])
    pad = 7  # good rules before each case: 183 cases x 8 = 1,464 rules, three chunks
    whens = []
    for case in CASES:
        whens += [f"metric = 'pad{len(whens) + k}'" for k in range(pad)]
        whens.append(case["when"])
    spread = _spark_verdicts(sql_spark, whens)
    assert {i // (pad + 1): reason for i, reason in spread.items()} == alone
    assert all(i % (pad + 1) == pad for i in spread)  # no good rule refused


@pytest.mark.spark
def test_the_function_table_is_the_installed_sparks(sql_spark):
    """``appliance.rules.spark_functions`` was written from this Spark: the same names and
    groups (scripts/spark_functions.py writes it again after a pyspark upgrade)."""
    import re

    from appliance.rules.spark_functions import FUNCTIONS, SPARK_VERSION

    assert SPARK_VERSION == sql_spark.version
    jvm = sql_spark.sparkContext._jvm
    registry = jvm.org.apache.spark.sql.catalyst.analysis.FunctionRegistry.expressions()
    names = {r.function for r in sql_spark.sql("SHOW SYSTEM FUNCTIONS").collect()
             if re.match(r"^[a-z_][a-z0-9_]*$", r.function)}
    assert names == set(FUNCTIONS)
    for name in sorted(names)[::7]:  # a sample of the groups (each a py4j call)
        entry = registry.get(name)
        group = (str(entry.get()._1().getGroup()) or None) if entry.isDefined() else None
        assert FUNCTIONS[name].group == group, name


@pytest.mark.spark
def test_the_collation_table_is_the_installed_sparks(sql_spark):
    """``appliance.rules.spark_collations`` was written from this Spark
    (scripts/spark_collations.py), and the check reads every name Spark lists, with its
    modifiers, as a collation."""
    from appliance.rules.rule_types import collation_key
    from appliance.rules.spark_collations import LOCALES, SPARK_VERSION

    assert SPARK_VERSION == sql_spark.version
    rows = sql_spark.sql("SHOW COLLATIONS").collect()
    plain = {r.NAME for r in rows if not r.NAME.upper().startswith("UTF8_")
             and (r.CASE_SENSITIVITY, r.ACCENT_SENSITIVITY, r.PAD_ATTRIBUTE)
             == ("CASE_SENSITIVE", "ACCENT_SENSITIVE", "NO_PAD")}
    assert plain == set(LOCALES)
    assert [r.NAME for r in rows if collation_key(r.NAME) is None] == []
