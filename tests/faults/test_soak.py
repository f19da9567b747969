"""``make soak``: hours of ``appliance run`` at a steady rate against a durable broker, the
deployed topology (issue 46, item 1). Nothing may creep: the broker's resident memory
stays within its stated bound and does not grow once warm, its open files stay level
(segments roll and retention deletes them), and the appliance's alert latency and the
broker's produce latency in the last quarter of the run are those of the first.

Only ``make soak`` runs it (``SOAK_SECONDS``, default four hours; the conftest deselects
the ``soak`` marker otherwise). A sample every ``SOAK_SAMPLE_SECONDS`` (a minute; less
for short runs) goes to the test's output and, as JSON lines, to
``reports/soak/broker_soak.jsonl``.
"""

from __future__ import annotations

import json
import os
import threading
import time
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path

import pytest

from appliance.broker import EmbeddedBroker
from appliance.broker.memory_bound import MIB, Load, bound
from appliance.broker.settings import BrokerConfig
from appliance.process.cpu_affinity import tree
from bench._broker_load import process_memory

from support.appliance_process import ApplianceProcess
from support.faults.fault_process import write_config
from support.faults.loadrun import LoadThread, rules_yaml

SECONDS = float(os.environ.get("SOAK_SECONDS", "14400"))
SAMPLE_S = float(os.environ.get("SOAK_SAMPLE_SECONDS", str(min(60.0, SECONDS / 24))))
RATE = float(os.environ.get("SOAK_RATE", "1000"))
EVENT_BYTES = 300  # about what the load generator's events weigh
REPORT = Path(__file__).resolve().parents[2] / "reports" / "soak" / "broker_soak.jsonl"

pytestmark = [pytest.mark.soak, pytest.mark.spark, pytest.mark.timeout(int(SECONDS) + 1800)]


@dataclass
class Sample:
    at_s: float
    broker_rss_mib: float
    broker_peak_mib: float
    broker_open_files: int
    broker_log_mib: float
    appliance_rss_mib: float
    produce_p99_ms: float | None  # this window's, from the broker's histogram
    alert_p99_ms: float | None  # this window's, from the appliance's histogram


def _scrape(url: str) -> str:
    return urllib.request.urlopen(url, timeout=10).read().decode()


def _buckets(text: str, metric: str, label: str = "") -> dict[float, float]:
    """Cumulative bucket counts of a histogram (summed over its other labels)."""
    out: dict[float, float] = {}
    for line in text.splitlines():
        if not line.startswith(metric + "_bucket{") or label not in line:
            continue
        le = line.split('le="', 1)[1].split('"', 1)[0]
        bound_s = float("inf") if le == "+Inf" else float(le)
        out[bound_s] = out.get(bound_s, 0.0) + float(line.rsplit(" ", 1)[1])
    return out


def _p99_ms(now: dict[float, float], before: dict[float, float]) -> float | None:
    """The window's p99 (the upper bound of the bucket it falls in), ms."""
    delta = {b: now[b] - before.get(b, 0.0) for b in now}
    total = delta.get(float("inf"), 0.0)
    if total <= 0:
        return None
    for b in sorted(delta):
        if delta[b] >= 0.99 * total:
            return b * 1000 if b != float("inf") else float("inf")
    return None


def _rss_mib(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            total += process_memory(pid).rss
        except (FileNotFoundError, KeyError):
            continue
    return total / MIB


def _metric(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"{name} not scraped")


def _quarter_median(values: list[float], last: bool) -> float:
    n = max(len(values) // 4, 1)
    part = sorted(values[-n:] if last else values[:n])
    return part[len(part) // 2]


def test_hours_of_the_appliance_keep_the_broker_flat(tmp_path):
    log_budget = int(min(256 * MIB, max(RATE * EVENT_BYTES * SECONDS / 3, 8 * MIB)))
    segment = max(log_budget // 16, 1 * MIB)
    topics = {"events": "events", "alerts": "alerts", "dead_letters": "events.dlq"}
    broker = EmbeddedBroker(data_dir=tmp_path / "broker", log_path=tmp_path / "broker.log",
                            topics={"events": 2, "alerts": 1, "events.dlq": 1},
                            extra_args=["--retention-total-bytes", str(log_budget),
                                        "--retention-total-policy", "keep-newest",
                                        "--segment-bytes", str(segment),
                                        "--metrics-port", "0"]).start()
    rules = tmp_path / "rules.yml"
    rules.write_text(rules_yaml())
    config = write_config(tmp_path, broker.bootstrap, topics, "continuous",
                          tmp_path / "checkpoint", rules)
    app = ApplianceProcess(config, tmp_path / "appliance.log")
    samples: list[Sample] = []
    stop = threading.Event()
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    try:
        ready = app.wait_for("appliance.ready")
        app_metrics = f"http://127.0.0.1:{ready['metrics_port']}/metrics"
        load = LoadThread(broker.bootstrap, topics, RATE, duration=SECONDS).start()
        started = time.monotonic()
        before_produce: dict[float, float] = {}
        before_alert: dict[float, float] = {}
        with REPORT.open("w") as out:
            while load.running() and not stop.is_set():
                time.sleep(SAMPLE_S)
                text = _scrape(broker.metrics_url)
                produce = _buckets(text, "broker_request_latency_seconds", 'api="Produce"')
                alerts = _buckets(_scrape(app_metrics), "appliance_alert_latency_seconds")
                mem = process_memory(broker.proc.pid)
                sample = Sample(
                    round(time.monotonic() - started, 1), mem.rss / MIB, mem.peak / MIB,
                    mem.open_files, _metric(text, "broker_log_bytes") / MIB,
                    _rss_mib(tree(app.proc.pid)), _p99_ms(produce, before_produce),
                    _p99_ms(alerts, before_alert))
                before_produce, before_alert = produce, alerts
                samples.append(sample)
                out.write(json.dumps(asdict(sample)) + "\n")
                out.flush()
                print(f"soak {sample.at_s:>8.0f}s broker rss {sample.broker_rss_mib:6.1f} MiB "
                      f"(peak {sample.broker_peak_mib:6.1f}) files {sample.broker_open_files:4d}"
                      f" log {sample.broker_log_mib:6.1f} MiB appliance "
                      f"{sample.appliance_rss_mib:7.1f} MiB produce p99 "
                      f"{sample.produce_p99_ms} ms alert p99 {sample.alert_p99_ms} ms",
                      flush=True)
        report = load.join(timeout=SECONDS + 900)
        limit = bound(BrokerConfig(data_dir="x", retention_total_bytes=log_budget),
                      Load(connections=32, partitions=4, segments=64,
                           request_bytes=1 << 20, groups=0))
    finally:
        stop.set()
        app.cleanup()
        broker.stop()
    assert report.lost == 0 and report.send_failed == 0
    assert len(samples) >= 4, "too short a run to judge"
    warm = samples[max(len(samples) // 5, 1):]  # after the first fifth: JIT, first segments
    rss = [s.broker_rss_mib for s in warm]
    files = [s.broker_open_files for s in warm]
    assert max(s.broker_peak_mib for s in samples) * MIB < limit.total, limit.describe()
    assert _quarter_median(rss, last=True) <= 1.2 * _quarter_median(rss, last=False) + 16
    assert max(files) - min(files) <= 16, files
    for name in ("produce_p99_ms", "alert_p99_ms"):
        values = [v for s in warm if (v := getattr(s, name)) is not None]
        assert values, f"no {name} samples"
        assert _quarter_median(values, last=True) <= 2 * _quarter_median(values, last=False) \
            + 10, (name, values)
