"""Every panel's queries and every recording rule against a real Prometheus with real data.

One stack (see stack.py): broker (and a ``kcat -G`` reader of its alerts), Spark master +
worker, ``appliance run`` (continuous), ``loadgen run`` and Prometheus scraping all of them
every second with the committed jobs and rules. While loadgen runs, every query of every
committed dashboard must return at least one series with a finite sample, every recording
rule must evaluate to one, the in-band latency histogram must agree with loadgen's p99
(tolerance: agreement.py), and ``appliance dashboards render`` must write one decodable
PNG per dashboard.
"""

from __future__ import annotations

import json
import math
import time
import types
import urllib.request

import matplotlib.image
import pytest
import yaml
from test_alert_latency_triggers import scrape_buckets

from appliance.cli import main
from dashboards import catalog

from support.dashboards.agreement import agreement, counts_match_records
from support.dashboards.stack import Stack, wait_for

# Generous bounds for a shared, slow machine (each wait inside is bounded too).
pytestmark = [pytest.mark.spark, pytest.mark.timeout(2400)]
LOAD_SECONDS = 45


def _has_data(result: list) -> bool:
    return any(math.isfinite(float(v)) for series in result for _t, v in series["values"])


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    s = Stack(tmp_path_factory.mktemp("stack"))
    try:
        s.start_broker()
        s.start_alert_consumer()
        s.start_spark_cluster()
        s.start_appliance()
        s.plan_loadgen()
        s.start_prometheus()
        s.started = time.time()
        s.start_loadgen(rate=200, seconds=LOAD_SECONDS)
        # Wait until every job was scraped successfully at least once (bounded).
        wait_for("every scrape target up",
                 lambda: all(s.targets_up().get(job) for job in s.targets), 300,
                 log=s.tmp / "prometheus.log", period=1.0,
                 detail=lambda: f"targets: {s.targets_up()}")
        # Let rate windows fill while the load runs (the load lasts LOAD_SECONDS).
        time.sleep(30)
        yield s
    finally:
        s.stop()


def test_every_panel_query_returns_data(stack):
    end = time.time()
    start = stack.started - 5
    empty = []
    checked = 0
    for board in catalog.load():
        for panel in board.panels:
            for target in panel.targets:
                expr = catalog.expand(target.expr, step_s=2.0, range_s=end - start)
                if not _has_data(stack.query_range(expr, start, end)):
                    empty.append(f"{board.title} / {panel.title}: {expr}")
                checked += 1
    assert checked >= 30
    assert not empty, "queries without data:\n" + "\n".join(empty)


def test_every_recording_rule_evaluates(stack):
    rules = yaml.safe_load((catalog.PROMETHEUS_DIR / "rules.yml").read_text())
    # The continuous stack's: the other triggers' latency targets select no instance here.
    records = [r["record"] + "".join(f'{{{k}="{v}"}}' for k, v in r.get("labels", {}).items()
                                     if k == "trigger")
               for g in rules["groups"] for r in g["rules"] if "record" in r
               and r.get("labels", {}).get("trigger", "continuous") == "continuous"]
    assert len(records) == 9
    end = time.time()
    missing = [r for r in records
               if not _has_data(stack.query_range(r, stack.started - 5, end))]
    assert not missing, f"recording rules without a finite value: {missing}"


def test_in_band_latency_agrees_with_loadgen_continuous(stack):
    wait_for("loadgen to finish", lambda: stack.loadgen.poll() is not None,
             LOAD_SECONDS + 240, log=stack.loadgen_log, period=1.0)
    assert stack.loadgen.returncode == 0, stack.loadgen_log.read_text()[-2000:]
    doc = json.loads(stack.loadgen_report.read_text())
    report = types.SimpleNamespace(latency_ms=doc["latency_ms"], floor_ms=doc["floor_ms"],
                                   behind_schedule=doc["behind_schedule"],
                                   latency_hdr=doc["latency_hdr"])
    port = int(stack.targets["appliance"].rsplit(":", 1)[1])
    counts = scrape_buckets(port, doc["received_alerts"])
    assert sum(counts) >= doc["received_alerts"] > 0
    result = agreement(counts, report, doc["received_alerts"])
    print(f"agreement continuous: {result}")  # the numbers for the notes (pytest -s / -rA)
    assert result.ok, result
    scraped, expected = counts_match_records(lambda: scrape_buckets(port, 0, timeout=0),
                                             stack.broker.bootstrap, stack.topics["alerts"])
    assert scraped == expected, (scraped, expected)


def test_render_writes_one_decodable_png_per_dashboard(stack, tmp_path, capsys):
    out = tmp_path / "png"
    code = main(["dashboards", "render", "--prometheus", stack.prometheus_url,
                 "--out", str(out), "--range", "2m", "--step", "2s"])
    assert code == 0, capsys.readouterr().err
    boards = catalog.load()
    pngs = sorted(out.glob("*.png"))
    assert [p.stem for p in pngs] == sorted(b.uid for b in boards)
    for png in pngs:
        assert png.stat().st_size > 0
        image = matplotlib.image.imread(png)
        assert image.shape[0] > 100 and image.shape[1] > 100


def test_broker_metrics_endpoint_counts_requests_per_api(stack):
    with urllib.request.urlopen(stack.broker.metrics_url, timeout=10) as r:
        text = r.read().decode()
    assert 'broker_requests_total{api="Produce",error="NONE"}' in text
    assert 'broker_request_latency_seconds_bucket{api="Fetch",le="0.0001"}' in text
    assert 'broker_log_end_offset{partition="0",topic="events"}' in text
