"""The appliance as the driver of a real standalone cluster, in each trigger mode.

Per trigger, one ``appliance run`` process drives the session's 2-worker cluster with
``spark.cores.max = 2``: the master spreads that over both workers, so each of the two
input partitions is read by an executor JVM of its own. First the known event mix must
give exactly the expected alerts and dead letters. Then, under a steady open-loop load
from ``loadgen run``, one executor JVM is killed with SIGKILL: no alert may be lost. Where
Spark recovers by itself (real-time and micro-batch retry the lost tasks), the appliance
must not notice. Continuous mode never retries a task, so the query dies: the appliance
must start it again in its own session (``appliance.process.restarts``). Its budget is one such
restart here, so a second kill must end in exit 1 with ``query.failed``, and the appliance
is restarted on the same checkpoint as systemd's ``Restart=on-failure`` would.
In between, the query is stopped (its executor JVMs with SIGSTOP, the driver and its
metrics run on): the age of the oldest unread event must grow by a second per second and
return to 0 once they go on (SIGCONT).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from appliance.process import process_group
from appliance.query.checkpoint import committed_offsets
from appliance.rules.rules_file import rules_version
from appliance.trigger import MODES, ProcessedFrom
from loadgen.arrivals import ArrivalClock
from loadgen.events import rules_yaml

from support.appliance_mix import MIX_RULES, check_outputs, make_mix
from support.appliance_process import ApplianceProcess
from support.cluster.cluster_config import write_cluster_config
from support.kafka_io import consume, has_all, produce
from support.scrape import appliance_metrics

pytestmark = [pytest.mark.spark, pytest.mark.cluster, pytest.mark.timeout(3000)]

TRIGGERS = ("continuous", "realtime", "microbatch")
#: What happens when an executor dies mid-stream (docs/appliance.md, "Executor loss").
RECOVERY = {"continuous": "in place", "realtime": "unaided", "microbatch": "unaided"}
#: ``[query] executor_loss_restarts``: one, so that the second loss shows the exit 1 path.
IN_PLACE_RESTARTS = 1
#: The mix's rules plus the example rules loadgen's events are built to match.
RULES = MIX_RULES + rules_yaml().split("\n", 1)[1]
LOADGEN_ID = re.compile(r"^lg[0-9a-f]+-\d+$")
RATE, KILL_AFTER_S = 200, 8
#: Continuous runs longer: the second kill comes once the first is recovered from.
LOAD_S = {"continuous": 50, "realtime": 25, "microbatch": 25}
GRACE_S = 900  # bound on waiting for the last alerts (a restart on a busy machine is slow)


@dataclass
class ClusterRun:
    """One trigger's appliance on the cluster; ``restart`` reuses config and checkpoint."""

    trigger: str
    config: Path
    topics: dict[str, str]
    directory: Path
    processes: list[ApplianceProcess] = field(default_factory=list)

    @property
    def proc(self) -> ApplianceProcess:
        return self.processes[-1]

    def start(self) -> ApplianceProcess:
        proc = ApplianceProcess(self.config, self.directory / f"run-{len(self.processes)}.log")
        self.processes.append(proc)
        proc.wait_for("appliance.ready", timeout=900)
        proc.wait_for("query.processing", timeout=600)
        return proc

    def app_id(self) -> str:
        return self.proc.wait_for("spark.ready")["app_id"]

    def cleanup(self) -> None:
        for proc in self.processes:
            proc.cleanup()


@pytest.fixture(scope="module", params=TRIGGERS)
def cluster_run(request, spark_cluster, broker, tmp_path_factory):
    trigger = request.param
    run = f"cluster-{trigger}-{uuid.uuid4().hex[:6]}"
    topics = {"events": f"{run}-events", "alerts": f"{run}-alerts",
              "dead_letters": f"{run}-dlq"}
    broker.create_topics({topics["events"]: 2, topics["alerts"]: 1, topics["dead_letters"]: 1})
    directory = tmp_path_factory.mktemp(run)
    config = write_cluster_config(directory, spark_cluster, broker.bootstrap, topics, trigger,
                                  RULES, spark={"spark.cores.max": "2"},
                                  query={"executor_loss_restarts": IN_PLACE_RESTARTS})
    cluster_run = ClusterRun(trigger, config, topics, directory)
    try:
        cluster_run.start()
        yield cluster_run
    finally:
        cluster_run.cleanup()


def test_known_mix_gives_exactly_the_expected_alerts_and_dead_letters(
        cluster_run, spark_cluster, broker):
    executors = spark_cluster.executors(cluster_run.app_id())
    assert len(executors) == 2 and len({e.worker for e in executors}) == 2, executors
    mix = make_mix(f"cluster-{cluster_run.trigger}")
    produce(broker.bootstrap, cluster_run.topics["events"], mix.records)
    alerts = consume(broker.bootstrap, cluster_run.topics["alerts"],
                     has_all("alert_id", mix.alerts), 240)
    dead = consume(broker.bootstrap, cluster_run.topics["dead_letters"],
                   has_all("raw", mix.dead_letters), 240)
    ours = [(k, v) for k, v in alerts if not LOADGEN_ID.match(json.loads(v)["alert_id"])]
    check_outputs(mix, ours, dead, rules_version=rules_version(RULES.encode("utf-8")))
    assert cluster_run.proc.proc.poll() is None


RELOAD_RULE = ("  - id: cluster-reload\n    severity: warning\n"
               "    when: \"metric = 'reload.check' AND value > 0\"\n")


def test_a_rules_reload_reaches_every_executor_and_their_counts_come_back(
        cluster_run, broker):
    """The rule book on a cluster: executors in JVMs of their own fetch a new version from
    the driver over Spark's RPC (no query restart) and report their per-rule counts back to
    the driver's ``/-/rules/stats`` page."""
    port = cluster_run.proc.wait_for("appliance.ready", 5)["metrics_port"]
    rules = cluster_run.directory / "rules.yml"
    rules.write_text(RULES + RELOAD_RULE)
    new_version = rules_version(rules.read_bytes())
    reloaded = subprocess.run(
        [sys.executable, "-m", "appliance", "rules", "reload", "--url",
         f"http://127.0.0.1:{port}/-/rules", "--timeout", "2m"],
        capture_output=True, text=True, timeout=180)
    assert reloaded.returncode == 0, reloaded.stdout + reloaded.stderr
    assert f"applied, rules version {new_version}" in reloaded.stdout
    ids = [f"reload-{uuid.uuid4().hex[:6]}-{i}" for i in range(20)]
    produce(broker.bootstrap, cluster_run.topics["events"], [json.dumps({
        "event_id": eid, "ts": time.time() * 1000, "source": "cluster", "metric": "reload.check",
        "value": 1.0}).encode() for eid in ids])
    alerts = consume(broker.bootstrap, cluster_run.topics["alerts"],
                     has_all("alert_id", set(ids)), 240)
    ours = [json.loads(v) for _k, v in alerts if json.loads(v)["alert_id"] in set(ids)]
    assert {a["rules_version"] for a in ours} == {new_version}
    assert all([r["id"] for r in a["rules"]] == ["cluster-reload"] for a in ours)
    # Both executors evaluated events (each reads one partition) and reported their counts.
    deadline, counts = time.monotonic() + 30, {}
    while time.monotonic() < deadline:
        direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback
        page = json.loads(direct.open(f"http://127.0.0.1:{port}/-/rules/stats",
                                      timeout=5).read())
        counts = {c["id"]: c for c in page["counts"]}
        if counts.get("cluster-reload", {}).get("matched", 0) >= len(ids):
            break
        time.sleep(1.0)
    assert counts["cluster-reload"]["matched"] >= len(ids), counts
    assert counts["cluster-reload"]["index_key"] == "metric"
    assert [e["event"] for e in cluster_run.proc.events()].count("query.started") == 1


#: How long the executors stay stopped, and the slack of one lag-age reading: the poller
#: refreshes every second, the reading can be that old (plus a scrape).
STOP_S, LAG_READING_SLACK_S = 8.0, 2.0


def _lag_ages(port: int, topic: str) -> dict[str, float]:
    prefix = "appliance_consumer_lag_seconds{"
    return {name: value for name, value in appliance_metrics(port).items()
            if name.startswith(prefix) and f'topic="{topic}"' in name}


def _wait_caught_up(port: int, topic: str, timeout: float) -> dict[str, float]:
    deadline = time.monotonic() + timeout
    ages = _lag_ages(port, topic)
    while time.monotonic() < deadline and not (len(ages) == 2 and set(ages.values()) == {0.0}):
        time.sleep(0.5)
        ages = _lag_ages(port, topic)
    return ages


def test_lag_age_grows_while_the_query_is_stopped_and_returns_to_zero(
        cluster_run, spark_cluster, broker):
    port = cluster_run.proc.wait_for("appliance.ready", 5)["metrics_port"]
    events = cluster_run.topics["events"]
    assert _wait_caught_up(port, events, 240) == {
        f'appliance_consumer_lag_seconds{{partition="{p}",topic="{events}"}}': 0.0
        for p in (0, 1)}
    executors = spark_cluster.executors(cluster_run.app_id())
    assert executors
    for executor in executors:
        os.kill(executor.pid, signal.SIGSTOP)
    samples = []
    try:
        written = time.time()
        produce(broker.bootstrap, events, [json.dumps({
            "event_id": f"lag-{i}", "ts": written * 1000, "source": "lag-age",
            "metric": "lag.age", "value": 1.0}).encode() for i in range(20)])
        while time.time() - written < STOP_S:  # bounded: STOP_S of readings
            time.sleep(1.0)
            samples.append((time.time() - written, max(_lag_ages(port, events).values())))
    finally:
        for executor in executors:
            os.kill(executor.pid, signal.SIGCONT)
    print(f"\nlag age ({cluster_run.trigger}) while stopped, (s since written, age s): "
          f"{[(round(t, 1), round(a, 1)) for t, a in samples]}")
    # Never older than the events, never shrinking, and as old as the stop at its end.
    assert all(age <= since + 0.5 for since, age in samples), samples
    assert all(b[1] >= a[1] for a, b in zip(samples, samples[1:], strict=False)), samples
    assert samples[-1][1] >= samples[-1][0] - LAG_READING_SLACK_S, samples
    # Going on, the query reads what waited: back to 0 on both partitions.
    ages = _wait_caught_up(port, events, 240)
    assert set(ages.values()) == {0.0} and len(ages) == 2, ages
    assert cluster_run.proc.proc.poll() is None


#: Marks' test: bursts of events, and how many the committed offset must lead the
#: checkpoint's by (a second of the load) at least once while a batch runs.
MARK_BURSTS, MARK_BURST, MARK_LEAD = 12, 100, 200


def test_the_exported_progress_inside_a_batch_comes_from_the_executors(
        cluster_run, broker):
    """On a cluster a real-time task's durable marks (``ProgressMarks``) travel from the
    executor's JVM to the driver over Spark's RPC: the committed offset the appliance
    exports (what its lag counts from) runs ahead of the checkpoint's newest batch while
    a batch runs. Continuous and micro-batch export their checkpoint's, never ahead of it
    (the exporter's reading is up to a second old)."""
    port = cluster_run.proc.wait_for("appliance.ready", 5)["metrics_port"]
    events = cluster_run.topics["events"]
    checkpoint = cluster_run.directory / "checkpoint"
    leads = []
    for burst in range(MARK_BURSTS):  # bounded: MARK_BURSTS half-seconds
        produce(broker.bootstrap, events, [json.dumps({
            "event_id": f"mark-{burst}-{i}", "ts": time.time() * 1000, "source": "marks",
            "metric": "marks", "value": 1.0}).encode() for i in range(MARK_BURST)])
        time.sleep(0.5)
        exported = {name: value for name, value in appliance_metrics(port).items()
                    if name.startswith("appliance_committed_offset{")
                    and f'topic="{events}"' in name}
        batch = committed_offsets(checkpoint).get(events, {})
        leads.append(int(sum(exported.values()) - sum(batch.values())))
    print(f"\n{cluster_run.trigger} on a cluster: exported minus checkpoint, per half-second: "
          f"{leads}")
    if MODES[cluster_run.trigger].processed_from is ProcessedFrom.CHECKPOINT_AND_MARKS:
        assert max(leads) >= MARK_LEAD, leads
    else:
        assert max(leads) <= 0, leads
    assert cluster_run.proc.proc.poll() is None


def _kill_an_executor(cluster_run, spark_cluster):
    victim = spark_cluster.executors(cluster_run.app_id())[0]
    os.kill(victim.pid, signal.SIGKILL)
    return victim, time.time()


def test_executor_kill_mid_stream_loses_no_alert(cluster_run, spark_cluster, broker):
    trigger, topics = cluster_run.trigger, cluster_run.topics
    report_path = cluster_run.directory / "load.json"
    load_log = (cluster_run.directory / "load.log").open("wb")
    clock = ArrivalClock(broker.bootstrap, topics["alerts"])
    load = subprocess.Popen(
        [sys.executable, "-m", "loadgen", "run", "--bootstrap", broker.bootstrap,
         "--rate", str(RATE), "--duration", str(LOAD_S[trigger]), "--alert-ratio", "0.2",
         "--events-topic", topics["events"], "--alerts-topic", topics["alerts"],
         "--dlq-topic", topics["dead_letters"], "--floor-seconds", "0",
         "--grace", str(GRACE_S),
         "--quiet", "--report", str(report_path)],
        stdout=load_log, stderr=subprocess.STDOUT, start_new_session=True)
    figures: dict = {}
    try:
        time.sleep(KILL_AFTER_S)  # steady load, alerts flowing
        victim, killed_at = _kill_an_executor(cluster_run, spark_cluster)
        if RECOVERY[trigger] == "in place":
            first = cluster_run.proc
            restarting = first.wait_for("query.restarting", timeout=120)
            assert "ExecutorLostFailure" in restarting["cause"], restarting
            figures["recovered_in_place_s"] = first.wait_for("query.recovered", 600)["seconds"]
            assert first.proc.poll() is None, "the appliance exited instead of restarting"
            # A fresh checkpoint at start (0), then the restart in place resumed it.
            port = first.wait_for("appliance.ready", 5)["metrics_port"]
            assert appliance_metrics(port)["appliance_recoveries_total"] == 1
            # The budget (one restart) is spent: the next loss is the supervisor's.
            _kill_an_executor(cluster_run, spark_cluster)
            code = first.proc.wait(timeout=120)
            assert code == 1, (code, first.log.read_text()[-4000:])
            refused = first.wait_for("query.restart_refused", timeout=5)
            assert refused["limit"] == IN_PLACE_RESTARTS, refused
            failed = first.wait_for("query.failed", timeout=5)
            assert "ExecutorLostFailure" in failed["cause"], failed
            cluster_run.start()  # as systemd's Restart=on-failure would
        deadline = time.monotonic() + LOAD_S[trigger] + GRACE_S + 120
        while load.poll() is None and time.monotonic() < deadline:
            assert cluster_run.proc.proc.poll() is None, \
                cluster_run.proc.log.read_text()[-4000:]
            time.sleep(0.5)
        assert load.poll() is not None, "loadgen did not finish in time"
    finally:
        if load.poll() is None:
            process_group.kill(load)
        load_log.close()
        clock.close()
    report = json.loads(report_path.read_text())
    first_alert_s, worst_wait_s = clock.first_after(killed_at), clock.worst_after(killed_at)
    print(f"\nexecutor loss ({trigger}): killed executor {victim.executor_id} "
          f"(pid {victim.pid}, {victim.worker}); {figures}; "
          f"alerts {report['received_alerts']}/{report['expected_alerts']}, "
          f"lost {report['lost']}, duplicates {report['duplicates']}; first alert of an "
          f"event sent after the kill {first_alert_s and round(first_alert_s, 1)} s after it, "
          f"the longest such an event waited {worst_wait_s and round(worst_wait_s, 1)} s"
          + (" (over both losses)" if RECOVERY[trigger] == "in place" else ""))
    assert report["sent"] > 0 and report["expected_alerts"] > 0
    assert report["lost"] == 0 and report["dlq_lost"] == 0, report
    assert report["unexpected_alerts"] == 0
    assert first_alert_s is not None
    if RECOVERY[trigger] == "unaided":
        assert len(cluster_run.processes) == 1
        assert not [e for e in cluster_run.proc.events()
                    if e.get("event") in ("query.restarting", "query.failed")]
