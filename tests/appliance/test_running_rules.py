"""The rules a run holds before Spark: loaded and checked without a JVM, and each later
part asked for before its step ran said as such (the compile is the Spark suites')."""

from __future__ import annotations

import pytest

from appliance.process.rules_check import RulesCheck
from appliance.process.running_rules import RunningRules
from appliance.rules.rules_file import EXAMPLE_RULES, RulesError, load_rule_set


def test_load_gives_the_files_rules_and_version():
    rules = RunningRules(EXAMPLE_RULES)
    assert rules.rules == ()
    loaded = rules.load()
    assert rules.running_rules() is loaded
    assert loaded.version == load_rule_set(EXAMPLE_RULES).version
    assert rules.rules == loaded.rules and len(rules.rules) > 0


def test_a_part_asked_for_before_its_step_names_the_step():
    rules = RunningRules(EXAMPLE_RULES)
    with pytest.raises(RuntimeError, match=r"load\(\) comes first"):
        rules.running_rules()
    with pytest.raises(RuntimeError, match=r"compile_into\(\) comes first"):
        rules.rule_book()
    with pytest.raises(RuntimeError, match=r"compile_into\(\) comes first"):
        rules.compiled_rules()
    assert rules.take_book() is None


def test_a_broken_file_is_refused_and_nothing_runs(tmp_path):
    path = tmp_path / "rules.yml"
    path.write_text('rules:\n  - id: bad\n    severity: info\n'
                    '    when: "value >"\n    message: m\n')
    rules = RunningRules(path)
    with pytest.raises(RulesError):
        rules.load()
    assert rules.rule_set is None and rules.rules == ()


def _many_rules(path, count: int, broken: int | None = None):
    """``count`` rules, the one at ``broken`` with an aggregate (refused)."""
    lines = ["rules:"]
    for i in range(count):
        when = "avg(value) > 1" if i == broken else f"metric = 'm{i % 200}' AND value >= {i}"
        lines.append(f'  - {{id: r{i}, severity: info, when: "{when}", message: m}}')
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_check_still_running_gives_the_same_rules_when_first_asked(tmp_path):
    """A large file's check runs beside the start (``appliance.process.rules_check``): the
    start gets the rule set the check gives, once asked for it."""
    path = _many_rules(tmp_path / "rules.yml", 3_000)  # ~0.5 s of checking
    rules = RunningRules(path, checking=RulesCheck(path))
    assert rules.rule_set is None and rules.checking is not None
    got = rules.running_rules()
    assert rules.checking is None and rules.running_rules() is got
    assert got == load_rule_set(path)


def test_a_check_still_running_refuses_with_the_lines_the_check_gives(tmp_path):
    path = _many_rules(tmp_path / "rules.yml", 3_000, broken=2_345)
    with pytest.raises(RulesError) as direct:
        load_rule_set(path)
    rules = RunningRules(path, checking=RulesCheck(path))
    with pytest.raises(RulesError) as pending:
        rules.running_rules()
    assert pending.value.problems == direct.value.problems
    assert len(pending.value.problems) == 1 and "rule 'r2345'" in pending.value.problems[0]
    assert rules.rule_set is None
