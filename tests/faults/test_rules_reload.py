"""Rules changed in the running appliance (``appliance rules reload``, which sends SIGHUP):
the same process and query take the new rules from the next epoch or batch without an
outage, in every trigger (continuous in ``make test``, the others in ``make faults``); a
broken file afterwards changes nothing, and SIGTERM still stops it cleanly.

Accounting is per event, read back from Kafka: every event the old rules alert on has its
alert throughout (nothing is evaluated by neither rule set), every event that only the new
rule matches and that was sent 5 s after the request has its alert with the new version,
and no event around the swap waits as if alerting had stopped (swap_outage.py: at most
a third of this run's own start-up, at least 3 s, more than the same run's steady state
did before it). What a swap costs in milliseconds is a figure, reported by ``make bench``
(``bench.rules_scale``: the longest wait around a live swap, 26-109 ms medians from 1 to
10,000 rules on a quiet machine, docs/appliance.md#rules-at-scale-measured), not asserted
here.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from datetime import datetime

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from appliance.rules.rules_file import rules_version
from appliance.trigger import DEFAULT, MODES, TRIGGERS

from support.appliance_process import ApplianceProcess
from support.faults.fault_process import ROOT, write_config
from support.faults.loadrun import LoadThread, rules_yaml
from support.faults.swap_outage import is_outage, outage_bound_s

# Alone (``make test`` runs exclusive tests after the parallel part): the bound compares the
# swap with this run's own steady state, and another worker's JVM start is not that.
pytestmark = [pytest.mark.spark, pytest.mark.exclusive, pytest.mark.timeout(900)]

RATE = 2000.0
BEFORE_S = 8.0     # steady state before the reload request
AFTER_S = 14.0     # load after the swap (the new rule's alerts: from 5 s after the request)
REJECTED_S = 6.0   # load after the broken file was refused
NEW_RULE = ("disk-watch", "info", "metric = 'disk.used_pct' AND value >= 40",
            "disk above 40%")
BROKEN_RULE = "  - id: disk-broken\n    severity: info\n    when: \"value >= no_such_fn(1)\"\n"


def new_rules() -> str:
    rule_id, severity, when, message = NEW_RULE
    return rules_yaml() + (f"  - id: {rule_id}\n    severity: {severity}\n"
                           f"    when: \"{when}\"\n    message: \"{message}\"\n")


def replace(path, text: str) -> None:
    """As editors and config management do it: a new file renamed over the old."""
    tmp = path.with_suffix(".new")
    tmp.write_text(text)
    tmp.replace(path)


@dataclass(frozen=True)
class Event:
    ts_s: float  # its scheduled send time
    metric: str
    value: float


@dataclass(frozen=True)
class Alert:
    written_s: float  # the sink's write time (the record's timestamp)
    rules: tuple[str, ...]
    version: str


def read_all(bootstrap: str, topic: str, timeout: float) -> list:
    """Every record ``topic`` holds now (up to its end offsets when called)."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             max_partition_fetch_bytes=8 << 20)
    try:
        parts = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic) or ()]
        consumer.assign(parts)
        consumer.seek_to_beginning(*parts)
        ends = consumer.end_offsets(parts)
        out: list = []
        deadline = time.monotonic() + timeout
        while any(consumer.position(tp) < end for tp, end in ends.items()):
            assert time.monotonic() < deadline, f"{topic}: not read to its end in {timeout} s"
            for batch in consumer.poll(timeout_ms=500, max_records=20000).values():
                out.extend(batch)
        return out
    finally:
        consumer.close()


def metrics_text(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        return r.read().decode()


def log_time(event: dict) -> float:
    """A log event's time (epoch s)."""
    return datetime.fromisoformat(event["timestamp"].replace("Z", "+00:00")).timestamp()


def caught_up(bootstrap: str, topics: dict[str, str], timeout: float = 120.0) -> None:
    """Until the query has processed everything sent so far: one alerting event per input
    partition, sent last, has its alert (a partition is read in order). The committed
    offsets cannot tell: a real-time batch commits only at its end."""
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        partitions = sorted(producer.partitions_for(topics["events"]))
        wanted = {f"sentinel-{p}" for p in partitions}
        for p in partitions:
            producer.send(topics["events"], partition=p, value=json.dumps({
                "event_id": f"sentinel-{p}", "ts": time.time() * 1000, "source": "test",
                "metric": "cpu.util", "value": 99.0}).encode())
        producer.flush()
        parts = [TopicPartition(topics["alerts"], p)
                 for p in consumer.partitions_for_topic(topics["alerts"])]
        consumer.assign(parts)
        consumer.seek_to_beginning(*parts)
        deadline = time.monotonic() + timeout
        while wanted and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=500).values():
                wanted -= {json.loads(r.value)["alert_id"] for r in batch}
        assert not wanted, f"the query did not process {sorted(wanted)} within {timeout} s"
    finally:
        producer.close()
        consumer.close()


def reload_cli(port: int) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "appliance", "rules", "reload",
         "--url", f"http://127.0.0.1:{port}/-/rules", "--timeout", "300"],
        capture_output=True, text=True, cwd=ROOT, timeout=330)


# `make test` runs the default trigger (75 s, alone); `make faults` the other two. A live
# swap in every trigger is also held, on a cluster, by tests/cluster/test_cluster_appliance.py
# (a rules reload reaching every executor).
@pytest.mark.parametrize("trigger", [
    pytest.param(t, marks=() if t == DEFAULT.name else pytest.mark.faults_long)
    for t in TRIGGERS])
def test_rules_swap_live_and_a_broken_file_changes_nothing(broker, fault_topics, tmp_path,
                                                          trigger):
    topics = fault_topics()
    rules = tmp_path / "rules.yml"
    rules.write_text(rules_yaml())
    old_version = rules_version(rules.read_bytes())
    config = write_config(tmp_path, broker.bootstrap, topics, trigger, tmp_path / "checkpoint",
                          rules, interval=MODES[trigger].default_interval)
    proc = ApplianceProcess(config, tmp_path / "run.log")
    try:
        ready = proc.wait_for("appliance.ready")
        assert ready["rules_version"] == old_version
        port = ready["metrics_port"]
        load = LoadThread(broker.bootstrap, topics, RATE,
                          duration=BEFORE_S + AFTER_S + REJECTED_S + 30.0, grace=120.0).start()
        time.sleep(BEFORE_S)

        replace(rules, new_rules())
        new_version = rules_version(rules.read_bytes())
        applied = reload_cli(port)
        assert applied.returncode == 0, applied.stdout + applied.stderr
        assert f"applied, rules version {new_version}" in applied.stdout, applied.stdout
        reloaded = proc.find("rules.reloaded")
        assert reloaded["version"] == new_version and reloaded["previous_version"] == old_version
        requested = log_time(proc.find("rules.reload_requested"))  # the signal's arrival
        swapped = log_time(reloaded)
        time.sleep(max(0.0, requested + 5.0 + AFTER_S - time.time()))

        replace(rules, new_rules() + BROKEN_RULE)
        refused = reload_cli(port)
        rejected_at = time.time()
        assert refused.returncode == 2, refused.stdout + refused.stderr
        line = refused.stderr.strip()
        assert len(line.splitlines()) == 1 and str(rules) in line and "disk-broken" in line, line
        assert proc.find("rules.rejected") is not None
        metrics = metrics_text(port)
        assert f'appliance_rules_info{{version="{new_version}"}} 1.0' in metrics
        assert 'appliance_rules_reloads_total{result="rejected"} 1.0' in metrics
        assert 'appliance_rules_reloads_total{result="applied"} 1.0' in metrics
        assert "appliance_rules_swap_seconds_count 1.0" in metrics
        # Per-rule counts: the rules that alert, as top-k series and on the stats page.
        assert f'appliance_rule_alerts_total{{rule="{NEW_RULE[0]}"}}' in metrics
        stats = subprocess.run(
            [sys.executable, "-m", "appliance", "rules", "stats", "--url",
             f"http://127.0.0.1:{port}/-/rules/stats", "--top", "5"],
            capture_output=True, text=True, cwd=ROOT, timeout=60)
        assert stats.returncode == 0, stats.stdout + stats.stderr
        assert f"rules version {new_version}" in stats.stdout and NEW_RULE[0] in stats.stdout

        report = load.join(timeout=600)
        caught_up(broker.bootstrap, topics)
        # The same process throughout: no second start, no restart.
        assert proc.proc.poll() is None, proc.text()[-3000:]
        assert [e["event"] for e in proc.events()].count("appliance.ready") == 1
        # ...and the same query: the rules reached it as data, it was never restarted.
        assert [e["event"] for e in proc.events()].count("query.started") == 1
        assert proc.find("query.failed") is None
        assert proc.terminate() == 0
    finally:
        proc.cleanup()

    events = {}
    for record in read_all(broker.bootstrap, topics["events"], timeout=120):
        doc = json.loads(record.value)
        if doc["event_id"].startswith("sentinel-"):
            continue
        events[doc["event_id"]] = Event(doc["ts"] / 1000.0, doc["metric"], doc["value"])
    assert len(events) == report.sent
    alerts: dict[str, list[Alert]] = {}
    for record in read_all(broker.bootstrap, topics["alerts"], timeout=120):
        doc = json.loads(record.value)
        alerts.setdefault(doc["alert_id"], []).append(Alert(
            record.timestamp / 1000.0, tuple(r["id"] for r in doc["rules"]),
            doc["rules_version"]))

    old_ids = {eid for eid in events if load.factory.kind(load.factory.index_of(eid))
               .startswith("alert:")}
    lost = sorted(old_ids - set(alerts))
    watched = {eid for eid, e in events.items()
               if e.metric == "disk.used_pct" and e.value >= 40}
    late = {eid for eid in watched if events[eid].ts_s >= requested + 5.0}
    missing = sorted((eid for eid in late
                      if not any("disk-watch" in a.rules and a.version == new_version
                                 for a in alerts.get(eid, ()))),
                     key=lambda eid: events[eid].ts_s)
    after_rejection = [eid for eid in late if events[eid].ts_s >= rejected_at + 1.0]
    versions = {a.version for found in alerts.values() for a in found}

    def waited(eid: str) -> float:
        return min(a.written_s for a in alerts[eid]) - events[eid].ts_s

    steady = sorted(waited(eid) for eid in old_ids
                    if requested - BEFORE_S + 3.0 <= events[eid].ts_s < requested)
    around = [waited(eid) for eid in alerts if eid in events
              and requested - 1.0 <= events[eid].ts_s <= swapped + 2.0]
    steady_p99 = steady[int(0.99 * (len(steady) - 1))]
    phases = {k: reloaded[k] for k in ("check_s", "compile_s", "effective_from", "in_effect",
                                       "in_effect_s")}
    print(f"{trigger}: swap gap {reloaded['gap_s']} s, reload {reloaded['seconds']} s "
          f"{phases}; events waited: steady p99 {steady_p99 * 1000:.0f} ms (median "
          f"{statistics.median(steady) * 1000:.0f} ms), around the swap max "
          f"{max(around) * 1000:.0f} ms over {len(around)} alerts (start-up "
          f"{ready['startup_s']} s); new-rule alerts missing "
          f"{len(missing)} of {len(late)}"
          + (f" (sent {events[missing[0]].ts_s - requested:.2f} to "
             f"{events[missing[-1]].ts_s - requested:.2f} s after the signal)"
             if missing else ""))
    assert lost == [], f"{len(lost)} alerts of the unchanged rules lost: {lost[:10]}"
    assert late and missing == [], f"{len(missing)} of {len(late)} new-rule alerts missing"
    assert after_rejection, "no events after the rejected reload"
    # Nothing but the two versions ever alerted: the broken file never ran.
    assert versions <= {old_version, new_version}, versions
    startup_s = ready["startup_s"]
    assert not is_outage(max(around), steady_p99, startup_s), (
        max(around), steady_p99, startup_s, outage_bound_s(startup_s))
