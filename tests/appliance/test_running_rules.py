"""The rules a run holds before Spark: loaded and checked without a JVM, and each later
part asked for before its step ran said as such (the compile is the Spark suites')."""

from __future__ import annotations

import pytest

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
