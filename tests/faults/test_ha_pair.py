"""An active/standby pair (``[ha]``): two real ``appliance run`` processes whose configs
differ only in ``[metrics] port``, one embedded broker, open-loop load with exact
accounting by ``alert_id``.

kill -9 of the active: the warm standby takes over within the session timeout plus its
query's start, and every alerting event still gets its alert. Then the killed instance
comes back as the standby and ``appliance ha handover`` makes it the active one (its
checkpoint is stale: it must start from the offsets the pair committed to Kafka), while
the old active steps down and waits warm; SIGSTOP of the active's process group (a frozen
host) lets the standby take over after the session timeout, and the frozen one, once it
runs again, is fenced and steps down; SIGTERM of the active hands over at once, without
waiting out a session timeout. Every phase under load, nothing lost. An instance with
another trigger than the pair's active one is refused (exit 2) before Spark starts. A
rule added once both have served twice in their processes (their rule books outlive
their queries) alerts from the one that serves, before and after the role moves again.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pytest
from kafka import KafkaConsumer, TopicPartition

from appliance.config import Config, load_config, write_config
from appliance.process import process_group

from support.appliance_process import ApplianceProcess
from support.child_env import ROOT, child_env
from support.faults.fault_accounting import account_alerts
from support.faults.fault_kafka import wait_for_records
from support.faults.fault_process import INTERVALS
from support.faults.loadrun import LoadThread, rules_yaml
from support.kafka_io import produce, rules_alerted
from support.ports import free_port
from support.scrape import metric_sum

pytestmark = [pytest.mark.spark, pytest.mark.timeout(1200)]

RATE = 150.0
SESSION_S = 6.0
# The trigger an instance that must be refused runs instead of the pair's.
OTHER = {"continuous": "microbatch", "microbatch": "continuous", "realtime": "continuous"}


def pair_config(tmp_path: Path, name: str, bootstrap: str, topics: dict[str, str],
                group: str, rules: Path, trigger: str) -> Path:
    """One instance's config: the pair's configs differ only in the metrics port."""
    return write_config(Config.model_validate({
        "kafka": {"bootstrap_servers": bootstrap},
        "topics": topics,
        "query": {"trigger": trigger, "interval": INTERVALS[trigger],
                  "checkpoint_dir": str(tmp_path / "checkpoints")},
        "rules": {"path": str(rules)},
        "spark": {"master": "local[2]", "spark.ui.enabled": "false"},
        "metrics": {"port": free_port()},
        "ha": {"group": group, "session_timeout": f"{SESSION_S:g} seconds",
               "rewarm_every": "10 seconds"},
    }), tmp_path / f"appliance-{name}.toml")


def metrics_url(config: Path) -> str:
    return f"http://127.0.0.1:{load_config(config, environ={}).metrics.port}/metrics"


def wait_count(proc: ApplianceProcess, event: str, count: int,
               timeout: float = 300) -> dict:
    """The ``count``-th ``event`` of the process's log, once it is there."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = [e for e in proc.events() if e.get("event") == event]
        if len(found) >= count:
            return found[count - 1]
        assert proc.proc.poll() is None, f"exited before its {count}. {event}"
        time.sleep(0.2)
    raise AssertionError(f"no {count}. {event} within {timeout} s")


def group_committed(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group,
                             enable_auto_commit=False)
    try:
        out = {p: consumer.committed(TopicPartition(topic, p)) for p in range(2)}
        return {p: o for p, o in out.items() if o is not None}
    finally:
        consumer.close(autocommit=False)


NEW_RULE = ("  - id: pair-new\n    severity: info\n    when: \"metric = 'pair.new'\"\n"
            "    message: \"a rule added while the pair runs\"\n")


def new_rule_alerts(bootstrap: str, topics: dict[str, str], tag: str, count: int = 5,
                    timeout: float = 60) -> None:
    """``count`` events only the new rule matches: each gets its alert, naming that rule."""
    ids = {f"{tag}-{n}" for n in range(count)}
    produce(bootstrap, topics["events"], [json.dumps(
        {"event_id": i, "ts": int(time.time() * 1000), "source": "pair", "metric": "pair.new",
         "value": 1.0}).encode() for i in sorted(ids)])

    got = rules_alerted(bootstrap, topics["alerts"], ids.__contains__, count, timeout)
    assert got == {i: ["pair-new"] for i in ids}, got


def _at(event: dict) -> float:
    return datetime.fromisoformat(event["timestamp"]).timestamp()


@dataclass
class Phase:
    """One fault under load: when it was struck and what the report line adds."""

    name: str
    at: float = 0.0
    note: str = ""

    def strike(self) -> float:
        self.at = time.time()
        return self.at


@contextmanager
def under_load(broker, topics: dict[str, str], label: str, name: str, duration: float,
               settle: float = 5.0) -> Iterator[Phase]:
    """Open-loop load for ``duration`` s; the body strikes its fault ``settle`` s in.
    Afterwards every alerting event sent must have its alert (exact accounting by
    ``alert_id``), and the phase's line is printed for the run's log."""
    load = LoadThread(broker.bootstrap, topics, RATE, duration=duration).start()
    wait_for_records(broker.bootstrap, topics["events"])
    time.sleep(settle)
    phase = Phase(name)
    yield phase
    report = load.join(timeout=600)
    assert report.send_failed == 0
    result = account_alerts(broker.bootstrap, topics["alerts"], load.factory, report.sent,
                            {name: phase.at})
    print(result.line(f"{label} {name} at {RATE:g}/s") + phase.note)
    assert result.lost == [], result.lost[:20]


@pytest.mark.parametrize("trigger", [
    "continuous",
    pytest.param("microbatch", marks=pytest.mark.faults_long),
    pytest.param("realtime", marks=pytest.mark.faults_long),
])
def test_pair_kill_9_handover_sigstop_and_sigterm_lose_nothing(trigger, broker, fault_topics,
                                                                 tmp_path):
    topics = fault_topics()
    group = f"pair-{uuid.uuid4().hex[:8]}"
    rules = tmp_path / "rules.yml"
    rules.write_text(rules_yaml())
    configs = {n: pair_config(tmp_path, n, broker.bootstrap, topics, group, rules, trigger)
               for n in ("a", "b")}
    procs: list[ApplianceProcess] = []

    def start(name: str, run: int) -> ApplianceProcess:
        procs.append(ApplianceProcess(configs[name], tmp_path / f"{name}-{run}.log"))
        return procs[-1]

    try:
        a = start("a", 0)
        a.wait_for("appliance.ready")
        assert a.find("ha.active") is not None
        b = start("b", 0)
        b.wait_for("ha.standby")
        assert b.find("appliance.ready") is None  # warm, waiting: no query
        assert {n: metric_sum(metrics_url(configs[n]), "appliance_ha_role")
                for n in configs} == {"a": 1.0, "b": 0.0}  # what AppliancePairNoStandby counts

        # kill -9 of the active under load: the standby takes over, nothing is lost.
        label = f"pair {trigger}"
        with under_load(broker, topics, label, "kill -9", 25.0, settle=8.0) as phase:
            # (8 s: epochs committed, their offsets in Kafka)
            assert group_committed(broker.bootstrap, group, topics["events"])
            a.kill()
            killed = phase.strike()
            b.wait_for("appliance.ready")
            phase.note = f"; standby serving after {time.time() - killed:.1f} s"
            active = b.find("ha.active")
            assert active is not None and active["starting_offsets"], active
            assert metric_sum(metrics_url(configs["b"]), "appliance_ha_takeovers_total") == 1.0

        # An instance that would run another query than the pair's active one is refused,
        # before its Spark starts, naming the difference.
        other = ApplianceProcess(
            pair_config(tmp_path, "c", broker.bootstrap, topics, group, rules, OTHER[trigger]),
            tmp_path / "c-0.log")
        procs.append(other)
        assert other.wait_exit(timeout=120) == 2
        refusal = [line for line in other.text().splitlines() if line.startswith("ha.group")]
        assert len(refusal) == 1 and refusal[0].startswith(
            f"ha.group {group}: query.trigger is '{OTHER[trigger]}' here but '{trigger}' on the "
            f"pair's active instance"), other.text()[-2000:]
        assert other.find("spark.ready") is None

        # The killed instance returns as the standby, and `appliance ha handover` makes
        # it the active one: its checkpoint is stale, it starts from Kafka's offsets; the
        # old active stops once the new one serves and waits warm as the standby.
        a2 = start("a", 1)
        a2.wait_for("ha.standby")
        with under_load(broker, topics, label, "handover", 15.0) as phase:
            phase.strike()
            handover = subprocess.run(
                [sys.executable, "-m", "appliance", "ha", "handover", "--config",
                 str(configs["a"]), "--timeout", "3m"],
                capture_output=True, text=True, env=child_env(), cwd=ROOT, timeout=240)
            assert handover.returncode == 0, handover.stderr
            assert f"serves group {group}" in handover.stdout, handover.stdout
            moved = a2.wait_for("ha.offsets_from_kafka")
            assert moved["stale_checkpoint"], moved  # not its own old state
            handed = wait_count(b, "ha.handed_over", 1)
            assert handed["to"] == a2.wait_for("ha.active")["instance"], handed
            # b's query ran until a2's had caught up with the events sent until its
            # election, not only until a2's query ran.
            caught = a2.wait_for("ha.caught_up")
            assert _at(caught) <= _at(handed), (caught, handed)
            wait_count(b, "ha.standby", 2)  # b waits again, warm, in the same process
            phase.note = f"; old active stopped {handed['seconds']} s after stepping down"

        # SIGSTOP of the active's whole process group (a frozen host): its membership
        # lapses, b takes over; once it runs again it learns it was fenced, stops its
        # query and waits as the standby, in the same process.
        with under_load(broker, topics, label, "SIGSTOP", 20.0) as phase:
            frozen = phase.strike()
            assert process_group.signal_group(a2.proc.pid, signal.SIGSTOP)
            try:
                elected = wait_count(b, "ha.elected", 2, timeout=SESSION_S + 60)
            finally:
                process_group.signal_group(a2.proc.pid, signal.SIGCONT)
            took_s = _at(elected) - frozen
            fenced = wait_count(a2, "ha.fenced", 1, timeout=60)
            assert wait_count(a2, "ha.stepping_down", 1)["reason"] == "fenced"
            wait_count(a2, "ha.standby", 2)
            wait_count(b, "ha.active", 2)
            phase.note = (f"; standby elected {took_s:.1f} s after the SIGSTOP; "
                          f"fenced: {fenced['cause']}")

        # A new rule: b (serving its second turn in its process) swaps it in live; a2,
        # waiting, is asked to (SIGHUP) and does when it serves.
        rules.write_text(rules_yaml() + NEW_RULE)
        reload = subprocess.run(
            [sys.executable, "-m", "appliance", "rules", "reload", "--config",
             str(configs["b"]), "--timeout", "2m"],
            capture_output=True, text=True, env=child_env(), cwd=ROOT, timeout=180)
        assert reload.returncode == 0, reload.stdout + reload.stderr
        a2.proc.send_signal(signal.SIGHUP)
        new_rule_alerts(broker.bootstrap, topics, "after-sigstop")

        # SIGTERM of the active: it leaves the group at once, a2 takes over again.
        with under_load(broker, topics, label, "SIGTERM", 15.0) as phase:
            stopped = phase.strike()
            assert b.terminate() == 0
            elected = wait_count(a2, "ha.elected", 2)
            handover_s = _at(elected) - stopped
            assert handover_s < SESSION_S, handover_s  # it left the group: no session timeout
            wait_count(a2, "ha.active", 2)
            phase.note = f"; standby elected {handover_s:.1f} s after the SIGTERM"
        new_rule_alerts(broker.bootstrap, topics, "after-sigterm")  # a2's second turn
        assert b.text().count('"ha.left"') == 2  # its step down, then the SIGTERM
        assert b.find("ha.rewarmed") is not None  # it waited warm, and kept warm
        assert a2.terminate() == 0
    finally:
        for proc in procs:
            proc.cleanup()
