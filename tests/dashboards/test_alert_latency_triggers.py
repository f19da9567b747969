"""The in-band alert latency histogram agrees with loadgen's end-to-end p99 in every trigger.

Continuous mode is checked by test_dashboards_live.py (``appliance run`` as its own
process, scraped by Prometheus); real-time and micro-batch here, in one shared
SparkSession: per trigger a fresh query on fresh topics, driven by loadgen's
Python API (floor phase included), exactly like ``appliance demo``. The tolerance and its
reasons are in ``agreement.py``. The histogram is read from the running appliance's
``/metrics`` endpoint (what Prometheus scrapes), not from its internals.
"""

from __future__ import annotations

import time
import urllib.request
import uuid

import pytest

from appliance.config import TopicsConfig
from appliance.observability.alert_latency import bucket_counts, observer_cpu_s
from appliance.process.runner import Appliance
from appliance.topics import default_partitions
from loadgen.config import LoadConfig
from loadgen.demo import demo_config
from loadgen.run import run_load

from support.dashboards.agreement import agreement, counts_match_records

# Generous bounds for a shared, slow machine (each wait inside is bounded too).
pytestmark = [pytest.mark.spark, pytest.mark.timeout(2400)]


def scrape(port: int) -> tuple[list[int], float]:
    """Per-bucket counts (all severities, +Inf last) and the observer's CPU seconds, from
    the appliance's /metrics text."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    cpu = observer_cpu_s(text)
    assert cpu is not None, "the observer's own CPU counter is not exported"
    return bucket_counts(text), cpu


def scrape_buckets(port: int, at_least: int, timeout: float = 30.0) -> list[int]:
    """The bucket counts once ``at_least`` alerts are filed (or at ``timeout``): the
    observer reads the alerts topic in fetches of up to half a second, so it may still be
    a fetch behind the consumer that just received them."""
    deadline = time.monotonic() + timeout
    counts, _cpu = scrape(port)
    while sum(counts) < at_least and time.monotonic() < deadline:
        time.sleep(0.25)
        counts, _cpu = scrape(port)
    return counts


@pytest.mark.parametrize("trigger", ["realtime", "microbatch"])
def test_in_band_p99_agrees_with_loadgen(trigger, spark, broker, tmp_path):
    run = uuid.uuid4().hex[:6]
    topics = TopicsConfig(events=f"lat-{run}-events", alerts=f"lat-{run}-alerts",
                          dead_letters=f"lat-{run}-dlq")
    config = demo_config(trigger, str(tmp_path / "cp"), broker.bootstrap) \
        .model_copy(update={"topics": topics})
    broker.create_topics(default_partitions(topics))
    appliance = Appliance(config, spark=spark)
    try:
        appliance.start()
        # A generous, bounded wait for the first commit: the machine may be shared.
        assert appliance.probes.wait_until_processing(timeout=900), appliance.probes.failure()
        # loadgen as the demo drives it, with a long (bounded) grace for a busy machine.
        report = run_load(LoadConfig(
            bootstrap=broker.bootstrap, rate=200, duration=8, grace=90,
            events_topic=topics.events, alerts_topic=topics.alerts,
            dlq_topic=topics.dead_letters, floor_seconds=2, progress=False))
        counts = scrape_buckets(appliance.metrics_port, report.received_alerts)
        _counts, observer_cpu_s = scrape(appliance.metrics_port)
        scraped, expected = counts_match_records(
            lambda: scrape_buckets(appliance.metrics_port, 0, timeout=0),
            broker.bootstrap, topics.alerts)
    finally:
        appliance.stop()
    assert report.ok, f"loadgen lost alerts: {report.lost}"
    assert report.floor_ms and report.floor_ms.get("p99") is not None
    # Every alert loadgen received was observed in-band too (duplicates may add more).
    assert sum(counts) >= report.received_alerts > 0
    assert observer_cpu_s > 0  # its cost is counted, and it did work
    assert scraped == expected, (scraped, expected)  # the histogram is the records'
    result = agreement(counts, report, report.received_alerts)
    print(f"agreement {trigger}: {result}")  # the numbers for the notes (pytest -s / -rA)
    assert result.ok, (f"{trigger}: {result} (loadgen {report.latency_ms}, "
                       f"duplicates {report.duplicates})")
