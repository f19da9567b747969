"""The ``appliance`` CLI as a subprocess: exit codes and one-line errors before Spark starts."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from support.child_env import child_env

ROOT = Path(__file__).resolve().parents[2]


def appliance(*args: str, env: dict | None = None, timeout: float = 60):
    return subprocess.run([sys.executable, "-m", "appliance", *args], capture_output=True,
                          text=True, timeout=timeout, env=child_env(**(env or {})), cwd=ROOT)


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def good_rules(tmp_path: Path) -> Path:
    return write(tmp_path / "rules.yml", (ROOT / "examples" / "rules.yml").read_text())


def test_rules_check_ok():
    """No JVM: the check answers from the rule language's own parser and Spark's function
    table, in well under a second for the example."""
    result = appliance("rules", "check", "examples/rules.yml")
    assert result.returncode == 0, result.stderr
    assert re.fullmatch(r"examples/rules\.yml: OK, 3 rules checked in \d+\.\d\d s",
                        result.stdout.strip()), result.stdout


@pytest.mark.parametrize("spark", [
    pytest.param(False, id="no-jvm"),
    pytest.param(True, id="spark", marks=pytest.mark.spark),
])
def test_rules_check_reports_every_problem_with_and_without_spark(tmp_path, spark):
    """The same verdicts and the same lines: Spark's compilation runs after the same check,
    and refuses nothing more here."""
    rules = write(tmp_path / "r.yml", """rules:
  - {id: ok, severity: info, when: "value > 1"}
  - {id: not-bool, severity: info, when: "concat(source, metric)"}
  - {id: udf, severity: info, when: "my_udf(value) > 1"}
""")
    result = appliance("rules", "check", str(rules), *(["--spark"] if spark else []),
                       timeout=180)
    assert result.returncode == 2, result.stderr
    lines = [ln for ln in result.stderr.splitlines() if ln.startswith(str(rules))]
    assert lines == [f"{rules}: rule 'not-bool': when: must be a boolean expression "
                     "(it is string)", f"{rules}: rule 'udf': when: unknown function 'my_udf'"]


def test_rules_check_structural_problems_all_listed(tmp_path):
    rules = write(tmp_path / "r.yml", """rules:
  - {id: A, severity: info, when: "value > 1"}
  - {id: b, severity: loud, when: "sum(value) > 1"}
  - {id: c, severity: info, when: "now() > ts"}
""")
    result = appliance("rules", "check", str(rules), "--no-spark")
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        f"{rules}: rule 'A': id: must match [a-z0-9][a-z0-9-]* (got 'A')",
        f"{rules}: rule 'b': severity: must be one of info, warning, critical (got 'loud')",
        f"{rules}: rule 'b': when: aggregate functions are not allowed (sum)",
        f"{rules}: rule 'c': when: current-time functions are not allowed (now)",
    ]


def test_run_with_bad_config_exits_2_with_one_line(tmp_path):
    good_rules(tmp_path)
    config = write(tmp_path / "appliance.toml", '[query]\ntrigger = "fast"\n')
    result = appliance("run", "--config", str(config))
    assert result.returncode == 2
    assert result.stderr.strip() == (f"{config}: query.trigger: must be one of continuous, "
                                     f"realtime, microbatch (got 'fast')")


def test_run_with_bad_env_override_exits_2(tmp_path):
    good_rules(tmp_path)
    config = write(tmp_path / "appliance.toml", "")
    result = appliance("run", "--config", str(config), env={"APPLIANCE_METRICS_PORT": "-1"})
    assert result.returncode == 2
    assert result.stderr.strip().startswith(
        f"{config}: metrics.port (from APPLIANCE_METRICS_PORT): must be 0..65535")


def test_ha_handover_without_a_pair_exits_2_and_without_a_standby_exits_1(tmp_path, broker):
    config = write(tmp_path / "appliance.toml", "[query]\n")
    result = appliance("ha", "handover", "--config", str(config))
    assert result.returncode == 2
    assert result.stderr.strip() == (f"{config}: ha.group: not set: the config names no "
                                     f"pair to hand over")
    config = write(tmp_path / "pair.toml", f'[kafka]\nbootstrap_servers = "{broker.bootstrap}"'
                                           f'\n[ha]\ngroup = "nobody-here"\n')
    result = appliance("ha", "handover", "--config", str(config), "--timeout", "5s")
    assert result.returncode == 1
    assert result.stderr.strip() == ("ha handover: group nobody-here has 0 member(s): no "
                                     "standby to hand over to (the active would hand over "
                                     "to nobody)")


def test_a_pair_whose_kafka_refuses_its_session_exits_2_before_spark_starts(tmp_path,
                                                                           broker):
    """The shared broker keeps Kafka's 6 s minimum session; the pair's default is 2 s."""
    good_rules(tmp_path)
    topics = {name: f"refused-{name}-{tmp_path.name}"[:200]
              for name in ("events", "alerts", "dead_letters")}
    broker.create_topics({t: 1 for t in topics.values()})
    config = write(tmp_path / "pair.toml",
                   f'[kafka]\nbootstrap_servers = "{broker.bootstrap}"\n[topics]\n'
                   + "".join(f'{k} = "{v}"\n' for k, v in topics.items())
                   + '[ha]\ngroup = "short-session"\n')
    result = appliance("run", "--config", str(config))
    assert result.returncode == 2, result.stderr
    said = [line for line in result.stderr.splitlines() if not line.startswith("{")]
    assert said == [
        "ha.session_timeout: 2 s is not a session this Kafka cluster takes: it accepts "
        "sessions of at least 6 s (group.min.session.timeout.ms=6000); set [ha] "
        "session_timeout (or APPLIANCE_HA_SESSION_TIMEOUT) to 6 s or more, or lower the "
        "cluster's group.min.session.timeout.ms"], result.stderr
    assert "spark.ready" not in result.stderr


def test_run_with_bad_rules_exits_2_before_spark_starts(tmp_path):
    rules = write(tmp_path / "rules.yml",
                  "rules:\n  - {id: cpu, severity: info, when: \"avg(value) > 1\"}\n")
    config = write(tmp_path / "appliance.toml",
                   '[kafka]\nbootstrap_servers = "127.0.0.1:1"\n')
    result = appliance("run", "--config", str(config))
    assert result.returncode == 2
    assert result.stderr.strip() == (f"{rules}: rule 'cpu': when: aggregate functions are "
                                     f"not allowed (avg)")
    assert "spark" not in result.stderr.lower()


def test_run_with_missing_rules_file_exits_2(tmp_path):
    config = write(tmp_path / "appliance.toml", '[rules]\npath = "nope.yml"\n')
    result = appliance("run", "--config", str(config))
    assert result.returncode == 2
    assert result.stderr.strip() == f"{tmp_path / 'nope.yml'}: file not found"


def test_bad_usage_exits_2():
    assert appliance("run", "--trigger", "fast").returncode == 2
    assert appliance("frobnicate").returncode == 2


def external_config(tmp_path: Path, broker, events: str, master: str = "local[2]") -> Path:
    good_rules(tmp_path)
    return write(tmp_path / "appliance.toml", f"""
[kafka]
bootstrap_servers = "{broker.bootstrap}"
[topics]
events = "{events}"
alerts = "{events}.alerts"
dead_letters = "{events}.dlq"
[spark]
master = "{master}"
""")


def test_run_refuses_too_few_task_slots_before_spark_starts(tmp_path, broker, new_topic):
    events = new_topic(3)
    broker.create_topics({f"{events}.alerts": 1, f"{events}.dlq": 1})
    config = external_config(tmp_path, broker, events, master="local[2]")
    result = appliance("run", "--config", str(config))
    assert result.returncode == 2, result.stderr
    assert ("query.trigger=continuous needs one task slot per input partition: the events "
            "topic has 3 partitions but spark.master=local[2] gives 2 slots; use at least 3"
            ) in result.stderr
    assert "spark.ready" not in result.stderr


def test_run_on_external_cluster_fails_clearly_on_missing_topics(tmp_path, broker, new_topic):
    events = new_topic(2)  # alerts and dead-letter topics deliberately not created
    config = external_config(tmp_path, broker, events)
    result = appliance("run", "--config", str(config))
    assert result.returncode == 2, result.stderr
    assert (f"topics missing on the Kafka cluster: {events}.alerts, {events}.dlq"
            in result.stderr)
    assert "spark.ready" not in result.stderr


@pytest.mark.spark
def test_demo_runs_end_to_end_and_writes_reports(tmp_path):
    report = tmp_path / "demo.json"
    result = appliance("demo", "--seconds", "3", "--rate", "100", "--report", str(report),
                       timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    summary = [ln for ln in result.stdout.splitlines() if ln.startswith("appliance demo")]
    assert len(summary) == 1 and "(lost 0)" in summary[0] and "p99" in summary[0], result.stdout
    doc = json.loads(report.read_text())
    assert doc["lost"] == 0 and doc["received_alerts"] == doc["expected_alerts"] > 0
    assert report.with_suffix(".md").is_file() and report.with_suffix(".png").is_file()
