"""The trigger modes' one home (appliance.trigger): the table's rules, what is derived from
it, and that nothing else (the appliance's other modules, the load generator, the bench,
the Ansible deploy) writes a trigger fact again."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest
import yaml

from appliance.config import Config, ConfigError, load_config
from appliance.trigger import (
    CONTINUOUS,
    MICROBATCH,
    MODES,
    REALTIME,
    TRIGGERS,
    ReadySignal,
    RulesSwitch,
    trigger_mode,
)
from appliance.tuning import IDLE_PROGRESS_INTERVAL_MS, main, tuning_for

ROOT = Path(__file__).resolve().parents[2]


def test_every_mode_is_in_the_table_under_its_own_name():
    assert TRIGGERS == ("continuous", "realtime", "microbatch")
    assert all(MODES[name].name == name for name in TRIGGERS)
    with pytest.raises(ValueError, match="must be one of continuous, realtime, microbatch"):
        trigger_mode("streaming")


@pytest.mark.parametrize("mode", MODES.values(), ids=TRIGGERS)
def test_each_default_interval_is_one_spark_accepts_for_its_mode(mode):
    assert mode.interval_problem(mode.default_interval, {}) is None
    config = Config.model_validate({"query": {"trigger": mode.name}})
    assert config.query.interval == mode.default_interval
    assert mode.trigger_kwargs("7 seconds") == {mode.spark_keyword: "7 seconds"}


def test_realtime_refuses_batches_shorter_than_sparks_minimum_and_the_conf_moves_it():
    assert REALTIME.interval_problem("1 second", {}) is not None
    assert REALTIME.interval_problem("1 second", {REALTIME.min_interval_conf: "1s"}) is None
    with pytest.raises(ConfigError, match="realtime trigger needs at least 5 seconds"):
        load_config(None, environ={"APPLIANCE_QUERY_TRIGGER": "realtime",
                                   "APPLIANCE_QUERY_INTERVAL": "1 second"})
    assert CONTINUOUS.interval_problem("10 ms", {}) is None


def test_the_modes_differ_where_spark_differs():
    assert [m.output_mode for m in MODES.values()] == ["append", "update", "append"]
    assert [m.slot_per_partition for m in MODES.values()] == [True, True, False]
    assert [m.ready for m in MODES.values()] == [
        ReadySignal.EPOCH_COMMITTED, ReadySignal.TASKS_LAUNCHED, ReadySignal.TRIGGER_COMPLETED]
    # new rules: between epochs or micro-batches; live inside a real-time batch (minutes)
    assert REALTIME.rules_switch is RulesSwitch.LIVE
    assert CONTINUOUS.rules_switch is MICROBATCH.rules_switch is RulesSwitch.NEXT_GENERATION
    # only a micro-batch query plans each trigger again (its warm-up may stream batches),
    # and the warm-up's batches follow one another without the interval's waiting
    assert [m.plans_every_batch for m in MODES.values()] == [False, False, True]
    assert MICROBATCH.eager_trigger_kwargs() == {"processingTime": "0 seconds"}


def test_the_tuning_follows_the_mode():
    for mode in MODES.values():
        tuning = tuning_for(mode)
        assert ("maxOffsetsPerTrigger" in tuning.source_options) == mode.admission_limits
        assert ("spark.task.maxFailures" in tuning.spark_conf) == (not mode.task_retries)
        assert bool(tuning.query_options) == mode.async_progress
        assert tuning.trigger is mode


def test_the_deploy_reads_each_modes_defaults_from_the_tuning_json(capsys):
    for name in TRIGGERS:
        assert main([name]) == 0
        printed = json.loads(capsys.readouterr().out)
        assert printed["trigger"]["name"] == name
        assert printed["trigger"]["default_interval"] == MODES[name].default_interval
        assert printed["trigger"]["ready"] == MODES[name].ready.name.lower()
    assert main(["streaming"]) == 2
    assert "must be one of" in capsys.readouterr().err


class Probe:
    """What a started query answers (the runner's Appliance in production)."""

    def __init__(self, commits=0, tasks=0, progress=False):
        self.commits, self.tasks, self.progress = commits, tasks, progress

    def epochs_committed(self):
        return self.commits

    def tasks_launched(self):
        return self.tasks

    def progress_reported(self):
        return self.progress


def test_what_ready_means_per_mode():
    assert not CONTINUOUS.is_processing(Probe(tasks=2, progress=True), partitions=2)
    assert CONTINUOUS.is_processing(Probe(commits=1), partitions=2)
    assert not REALTIME.is_processing(Probe(commits=5, tasks=1), partitions=2)
    assert REALTIME.is_processing(Probe(tasks=2), partitions=2)
    assert not MICROBATCH.is_processing(Probe(commits=1, tasks=2), partitions=2)
    assert MICROBATCH.is_processing(Probe(progress=True), partitions=2)


def test_progress_interval_and_rules_switch_wait_follow_the_mode():
    assert CONTINUOUS.progress_interval_s("100 ms", IDLE_PROGRESS_INTERVAL_MS) == 0.1
    assert MICROBATCH.progress_interval_s("0 seconds", IDLE_PROGRESS_INTERVAL_MS) == 1.0
    assert REALTIME.progress_interval_s("5 minutes", IDLE_PROGRESS_INTERVAL_MS) == 300.0
    assert CONTINUOUS.switch_wait_s("1 second") == 4.0   # two epochs and a margin
    assert REALTIME.switch_wait_s("5 minutes") < 60      # never waits out a long batch


#: Where the trigger facts must not be written again: Python packages (every module but the
#: table itself) and the deploy's YAML and templates.
GUARDED_PACKAGES = ("appliance", "loadgen", "bench")
SPARK_KEYWORDS = frozenset(m.spark_keyword for m in MODES.values())


def _trigger_facts(path: Path) -> list[int]:
    """Lines that re-encode a trigger fact: a comparison with a trigger's name
    (``x == "continuous"``, ``x in ("realtime", ...)``), a table keyed by trigger names
    (``{"continuous": "1 second", "realtime": ...}``), or Spark's trigger keyword spelled out
    (``.trigger(processingTime=...)``)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Compare):
            for side in (node.left, *node.comparators):
                values = side.elts if isinstance(side, ast.Tuple | ast.List | ast.Set) else [side]
                if any(isinstance(v, ast.Constant) and v.value in TRIGGERS for v in values):
                    found.append(node.lineno)
        elif isinstance(node, ast.Dict) and node.keys:
            # keyed by trigger names only (a table keyed by bench cells, say, is not)
            if all(isinstance(k, ast.Constant) and k.value in TRIGGERS for k in node.keys):
                found.append(node.lineno)
        elif isinstance(node, ast.Call):
            if any(k.arg in SPARK_KEYWORDS for k in node.keywords):
                found.append(node.lineno)
    return sorted(found)


_NAMES = "|".join(TRIGGERS)
_JINJA_COMPARISON = re.compile(
    rf"(==|!=|\bin\b)\s*[\[(]?\s*['\"]?({_NAMES})\b|\b({_NAMES})['\"]?\s*(==|!=)")


def _ansible_trigger_comparisons(path: Path) -> list[int]:
    """Lines of a playbook or template that compare a trigger's name (Jinja ``==``,
    ``!=``, ``in``): the deploy asks ``python -m appliance.tuning`` instead."""
    return [n for n, line in enumerate(path.read_text().splitlines(), 1)
            if _JINJA_COMPARISON.search(line)]


def test_no_module_but_the_trigger_table_encodes_a_trigger_fact():
    modules = [p for package in GUARDED_PACKAGES for p in (ROOT / package).rglob("*.py")
               if p != ROOT / "appliance" / "trigger.py"]
    assert {p.relative_to(ROOT).parts[0] for p in modules} == set(GUARDED_PACKAGES)
    hits = [f"{p.relative_to(ROOT)}:{line}" for p in modules for line in _trigger_facts(p)]
    assert hits == []


def test_the_check_finds_each_kind_of_fact(tmp_path):
    module = tmp_path / "bad.py"
    module.write_text('def f(t, w):\n'
                      '    return t.name == "realtime" or t in ("microbatch",)\n'
                      'INTERVALS = {"continuous": "1 second", "realtime": "5 s"}\n'
                      'CELLS = {"continuous": 1, "continuous-50k": 2}\n'
                      'def g(w):\n'
                      '    return w.trigger(processingTime="0 seconds")\n')
    assert _trigger_facts(module) == [2, 2, 3, 6]


def test_the_deploy_compares_no_trigger_name_and_offers_the_tables_choices():
    files = [p for p in (ROOT / "ansible").rglob("*") if p.suffix in (".yml", ".j2")]
    assert len(files) > 10
    hits = [f"{p.relative_to(ROOT)}:{line}" for p in files
            for line in _ansible_trigger_comparisons(p)]
    assert hits == []
    spec = yaml.safe_load((ROOT / "ansible/roles/appliance/meta/argument_specs.yml").read_text())
    option = spec["argument_specs"]["main"]["options"]["appliance_trigger"]
    assert tuple(option["choices"]) == TRIGGERS


def test_the_deploy_check_finds_a_comparison(tmp_path):
    task = tmp_path / "bad.yml"
    task.write_text("- when: appliance_trigger == 'realtime'\n"
                    "- when: appliance_trigger in ['continuous', 'realtime']\n"
                    "- when: \"'microbatch' != appliance_trigger\"\n"
                    "- name: a continuous query\n")
    assert _ansible_trigger_comparisons(task) == [1, 2, 3]
