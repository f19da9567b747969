"""Rules validation: every rejection class, every problem reported with its rule id."""

from __future__ import annotations

import textwrap

import pytest

from appliance.rules.rule_book import compile_rules
from appliance.rules.rules_file import (
    Rule,
    RulesError,
    RuleSet,
    load_rule_set,
    load_rules,
    parse_rules,
)


def rules_yaml(*rules: tuple[str, str, str]) -> str:
    lines = ["rules:"]
    for rule_id, severity, when in rules:
        lines += [f"  - id: {rule_id}", f"    severity: {severity}", f"    when: {when!r}"]
    return "\n".join(lines) + "\n"


def problems(text: str) -> list[str]:
    with pytest.raises(RulesError) as err:
        parse_rules(text, "r.yml")
    return err.value.problems


def test_example_rules_are_valid():
    rules = load_rules("examples/rules.yml")
    assert [r.id for r in rules] == ["cpu-critical", "mem-warning", "disk-info"]
    assert [r.ordinal for r in rules] == [3, 2, 1]
    assert rules[0].message == "CPU at or above 95%"


def test_message_defaults_to_the_expression():
    rule = parse_rules(rules_yaml(("a", "info", "value > 1")))[0]
    assert rule == Rule(id="a", severity="info", when="value > 1", message="value > 1")


@pytest.mark.parametrize("rule_id, severity, when, expected", [
    ("Bad_Id", "info", "value > 1", "r.yml: rule 'Bad_Id': id: must match [a-z0-9][a-z0-9-]*"),
    ("a", "fatal", "value > 1", "r.yml: rule 'a': severity: must be one of info, warning, "
                                "critical (got 'fatal')"),
    ("a", "info", "value >", "r.yml: rule 'a': when: column 8: an expression after '>', "
                             "found the end of the expression"),
    ("a", "info", "value > 1 AND", "r.yml: rule 'a': when: column 14: AND needs an "
                                   "expression on its right"),
    ("a", "info", "value > > 1", "r.yml: rule 'a': when: column 9: expected a value"),
    ("a", "info", "value > 1 hot", "r.yml: rule 'a': when: column 11: a rule is one "
                                   "expression, not a named column"),
    ("a", "info", "my_udf(value) > 1", "r.yml: rule 'a': when: unknown function 'my_udf'"),
    ("a", "info", "abs(value, 2) > 1", "r.yml: rule 'a': when: abs takes 1 argument, not 2"),
    ("a", "info", "tags LIKE 'x%'", "r.yml: rule 'a': when: LIKE matches text, and 'tags' "
                                    "is a map<string,string>"),
    ("a", "info", "NOT value", "r.yml: rule 'a': when: NOT needs true/false, and 'value' is "
                               "a double"),
    ("a", "info", "hostname = 'x'", "r.yml: rule 'a': when: unknown field 'hostname'"),
    ("a", "info", "sum(value) > 10", "r.yml: rule 'a': when: aggregate functions are not "
                                     "allowed (sum)"),
    ("a", "info", "value > (SELECT 1)", "r.yml: rule 'a': when: subqueries are not allowed"),
    ("a", "info", "rank() OVER (ORDER BY ts) = 1",
     "r.yml: rule 'a': when: window functions are not allowed"),
    ("a", "info", "ts < unix_millis(current_timestamp())",
     "r.yml: rule 'a': when: current-time functions are not allowed"),
    ("a", "info", "now() > ts", "r.yml: rule 'a': when: current-time functions"),
    ("a", "info", "rand() > 0.5", "r.yml: rule 'a': when: must be deterministic"),
    ("a", "info", "value + 1", "r.yml: rule 'a': when: must be a boolean expression (it is "
                               "double)"),
    ("a", "info", "SELECT 1", "r.yml: rule 'a': when: must be a boolean expression, not a "
                              "statement"),
    ("a", "info", "value > 1; value < 2", "r.yml: rule 'a': when: must be exactly one"),
])
def test_each_rejection_class(rule_id, severity, when, expected):
    found = problems(rules_yaml((rule_id, severity, when)))
    assert any(p.startswith(expected) for p in found), found


def test_lambda_variables_and_tags_are_allowed():
    rules = parse_rules(rules_yaml(
        ("a", "info", "exists(map_keys(tags), k -> k = 'env')"),
        ("b", "warning", "tags['env'] = 'prod' AND value BETWEEN 1 AND 2"),
    ))
    assert [r.id for r in rules] == ["a", "b"]


def test_every_problem_is_reported_with_its_rule_id():
    text = textwrap.dedent("""\
        rules:
          - id: dup
            severity: info
            when: "value > 1"
          - id: dup
            severity: info
            when: "value > 2"
          - id: two-things
            severity: nope
            when: "max(value) > 1"
            colour: red
          - severity: info
            when: "value > 1"
          - just a string
        """)
    found = problems(text)
    assert "r.yml: rule 'dup': id: duplicate" in found
    assert "r.yml: rule 'two-things': severity: must be one of info, warning, critical " \
           "(got 'nope')" in found
    assert "r.yml: rule 'two-things': when: aggregate functions are not allowed (max)" in found
    assert "r.yml: rule 'two-things': colour: unknown key" in found
    assert "r.yml: rules[3]: id: missing" in found
    assert "r.yml: rules[4]: must be a mapping with id, severity, when" in found
    assert len(found) == 6


@pytest.mark.parametrize("text, expected", [
    ("rules: [", "r.yml: not valid YAML"),
    ("alerts: []", "r.yml: rules: must be a list"),
    ("rules: []", "r.yml: rules: must list at least one rule"),
    ("rules:\n  - id: a\n    severity: info\n", "r.yml: rule 'a': when: missing"),
])
def test_file_level_problems(text, expected):
    assert any(p.startswith(expected) for p in problems(text))


def test_missing_file(tmp_path):
    with pytest.raises(RulesError, match="nope.yml: file not found"):
        load_rules(tmp_path / "nope.yml")


@pytest.mark.spark
def test_spark_compilation_names_each_rule_spark_refuses(appliance_spark):
    """The running appliance's own check: all rules analysed at once, a failing analysis
    halved down to the rules at fault, each named with Spark's message."""
    bad = [
        Rule("not-boolean", "info", "concat(source, metric)", ""),
        Rule("python-udf", "info", "my_python_udf(value) > 1", ""),
        Rule("bad-type", "info", "tags > 1", ""),
        Rule("good", "info", "metric = 'cpu' AND value > 1", ""),
    ]
    with pytest.raises(RulesError) as err:
        compile_rules(appliance_spark, RuleSet(tuple(bad), "v", "r.yml"))
    found = err.value.problems
    assert len(found) == 3, found
    assert found[0] == "r.yml: rule 'not-boolean': when: must be a boolean expression " \
                       "(it is string)"
    assert found[1].startswith("r.yml: rule 'python-udf': when: [UNRESOLVED_ROUTINE]")
    assert found[2].startswith("r.yml: rule 'bad-type': when: [DATATYPE_MISMATCH")


@pytest.mark.spark
def test_spark_compilation_catches_nondeterminism_and_aggregates(appliance_spark):
    bad = [Rule("nd", "info", "value > rand()", ""),
           Rule("agg", "info", "count(1) > 0", ""),
           Rule("win", "info", "row_number() OVER (ORDER BY ts) = 1", "")]
    with pytest.raises(RulesError) as err:
        compile_rules(appliance_spark, RuleSet(tuple(bad), "v", "r.yml"))
    assert err.value.problems == [
        "r.yml: rule 'nd': when: must be deterministic",
        "r.yml: rule 'agg': when: aggregate and window functions are not allowed",
        "r.yml: rule 'win': when: aggregate and window functions are not allowed",
    ]
    examples = load_rules("examples/rules.yml")
    compile_rules(appliance_spark, RuleSet(tuple(examples), "v", "examples/rules.yml"))


#: Rules that type-check but can never match (or only by accident): each refused with one
#: line naming the rule, the field and the types, by the check and by Spark's pass alike.
NEVER_MATCH = [
    ("abc", "value > 'abc'", "can never match: 'abc' is not a number, and value is a double"),
    ("text-number", "metric = 95", "compares the text field metric (a string) with the "
                                   "number 95 (an int)"),
    ("mixed-in", "value IN ('a', 'b')", "IN of two types: value "),
    ("like-number", "value LIKE '9%'", "LIKE on a number: value is a double"),
    ("two-values", "metric = 'a' AND value > 1 AND metric = 'b'",
     "can never match: metric (a string) cannot be 'a' and 'b' at once"),
    ("empty-range", "value > 10 AND value < 5",
     "can never match: no value (a double) is > 10 and < 5"),
]


def test_the_check_refuses_rules_that_can_never_match(tmp_path):
    path = tmp_path / "r.yml"
    path.write_text(rules_yaml(*[(rid, "info", when) for rid, when, _ in NEVER_MATCH],
                               ("fine", "info", "metric = '95' AND value > 5")))
    with pytest.raises(RulesError) as err:
        load_rule_set(path)
    assert len(err.value.problems) == len(NEVER_MATCH), err.value.problems
    for line, (rid, _when, says) in zip(err.value.problems, NEVER_MATCH, strict=True):
        assert line.startswith(f"{path}: rule {rid!r}: when: {says}"), line


@pytest.mark.spark
def test_spark_refuses_rules_that_can_never_match(sql_spark):
    """The running appliance's own pass (start-up and every reload compile with it, in its
    SQL settings) refuses them too, without the check's help."""
    rules = [Rule(rid, "info", when, "") for rid, when, _ in NEVER_MATCH]
    rules.append(Rule("fine", "info", "metric = '95' AND value > 5", ""))
    with pytest.raises(RulesError) as err:
        compile_rules(sql_spark, RuleSet(tuple(rules), "v", "r.yml"))
    found = err.value.problems
    assert len(found) == len(NEVER_MATCH), found
    for line, (rid, _when, says) in zip(found, NEVER_MATCH, strict=True):
        assert line.startswith(f"r.yml: rule {rid!r}: when: "), line
        assert says.split(":")[0] in line, line
