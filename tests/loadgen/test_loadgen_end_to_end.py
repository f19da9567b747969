"""End-to-end: loadgen against a real broker and the relay stand-in (tests/loadgen/relay.py).

Every number asserted here comes out of real Kafka traffic; nothing is mocked.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import threading
import time
import urllib.request

import pytest
from matplotlib import image as mpimg

from loadgen.collector import end_offsets
from loadgen.config import LoadConfig
from loadgen.latency import decode_histogram
from loadgen.run import run_load

from support.ports import free_port


def _loadgen(lg_env, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """``python -m loadgen ARGS`` from the work tree, output captured."""
    return subprocess.run([sys.executable, "-m", "loadgen", *args], capture_output=True,
                          text=True, timeout=timeout, cwd=lg_env.root, env=lg_env.env)


def _topic_args(topics: dict) -> list[str]:
    return ["--events-topic", topics["events"], "--alerts-topic", topics["alerts"],
            "--dlq-topic", topics["dlq"]]



def _run_in_thread(config: LoadConfig) -> tuple[threading.Thread, dict]:
    """Start ``run_load(config)`` in a thread; its report lands in ``box["report"]``."""
    box: dict = {}
    runner = threading.Thread(target=lambda: box.update(report=run_load(config)))
    runner.start()
    return runner, box


REQUIRED_KEYS = {"sent", "achieved_rate", "expected_alerts", "received_alerts", "lost",
                 "duplicates", "dlq_expected", "dlq_received", "floor_ms", "latency_ms",
                 "behind_schedule"}


def test_cli_run_accounts_for_every_alert_and_dead_letter(lg_bootstrap, lg_topics, relay,
                                                          lg_env, tmp_path):
    report_path = tmp_path / "run.json"
    proc = _loadgen(lg_env, "run", "--bootstrap-server", lg_bootstrap,
                    "--rate", "500", "--duration", "4s", "--alert-ratio", "0.3",
                    "--bad-ratio", "0.1", "--workers", "2", *_topic_args(lg_topics),
                    "--floor-duration", "1s", "--grace", "15s", "--report", str(report_path))
    assert proc.returncode == 0, proc.stderr
    report = json.loads(report_path.read_text())
    assert REQUIRED_KEYS <= report.keys()
    assert report["sent"] == report["scheduled"] == 2000
    assert 400 < report["achieved_rate"] <= 500.5
    assert report["expected_alerts"] == pytest.approx(600, abs=5)
    assert report["received_alerts"] == report["expected_alerts"]
    assert report["lost"] == 0 and report["unexpected_alerts"] == 0
    assert report["duplicates"] == 0 and report["malformed_answers"] == 0
    assert report["dlq_expected"] == pytest.approx(200, abs=5)
    assert report["dlq_received"] == report["dlq_expected"]
    latency = report["latency_ms"]
    assert latency["count"] == report["received_alerts"]
    assert 0 < latency["p50"] <= latency["p90"] <= latency["p99"] <= latency["p999"]
    assert latency["p999"] <= latency["max"] < 5000  # plausible for a local relay
    floor = report["floor_ms"]
    assert floor["source"] == "measured" and 0 < floor["p50"] <= floor["max"]
    # On a shared, busy CPU the producer may honestly report hiccups (late events); it
    # must still send everything, and call it falling behind only past 0.1 % late.
    behind = report["behind_schedule"]
    assert behind["unsent"] == 0
    assert behind["fell_behind"] == (behind["late_events"] > 0.001 * report["sent"])
    # Markdown and PNG next to the JSON; the PNG reads back as an image.
    markdown = report_path.with_suffix(".md").read_text()
    assert "End-to-end latency" in markdown and f"{report['run_id']}" in markdown
    png = report_path.with_suffix(".png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    height, width, _channels = mpimg.imread(png).shape
    assert width > 400 and height > 200
    # Progress on stderr, one line a second (not a TTY here).
    assert proc.stderr.count("loadgen [run]") >= 3
    assert json.loads(proc.stdout)["lost"] == 0


def test_pause_in_the_appliance_shows_in_every_event_scheduled_during_it(
        lg_bootstrap, lg_topics, relay):
    """Coordinated omission: a 1.5 s stall must cost every event scheduled inside it.

    Event scheduled at ``s`` inside a stall ending at ``p1`` waits ``p1 - s`` at least, so
    at least the events of the stall's first half (about rate * pause / 2) wait pause/2 or
    more. A generator that timed from its own (delayed) send, or slowed down with the
    appliance, would report far fewer. Nor may the stall be charged to events scheduled
    before it. How long the relay takes to drain its backlog after the stall is the
    machine's business (on a starved CPU, seconds), so no bound here depends on it.
    """
    rate, pause_s = 400, 1.5
    config = LoadConfig(bootstrap=lg_bootstrap, rate=rate, duration=6.0, alert_ratio=1.0,
                        events_topic=lg_topics["events"], alerts_topic=lg_topics["alerts"],
                        dlq_topic=lg_topics["dlq"], grace=15, progress=False)
    with _first_record_watch(lg_bootstrap, lg_topics["events"]) as first_record:
        runner, box = _run_in_thread(config)
        assert first_record(timeout=30), "the run never started sending"
    time.sleep(1.0)  # pause from ~1 s to ~2.5 s into the 6 s schedule
    paused_at = time.time()
    relay.pause()
    time.sleep(pause_s)
    relay.resume()
    resumed_at = time.time()
    runner.join(timeout=60)
    report = box["report"]
    measured_pause = resumed_at - paused_at
    t0 = report.schedule_start_epoch
    assert t0 + 1.0 <= paused_at and resumed_at < t0 + config.duration, \
        "pause outside the schedule"
    assert report.lost == 0 and report.received_alerts == report.expected_alerts == 2400
    assert report.latency_ms["max"] >= (measured_pause - 0.15) * 1000
    histogram = decode_histogram(report.latency_hdr)
    half = measured_pause / 2
    at_least_half = histogram.get_total_count() - sum(
        histogram.get_count_at_value(v) for v in _recorded_values(histogram)
        if v < half * 1_000_000)
    # Only events scheduled after the pause began (and the few still in flight at that
    # moment: a quarter of a second's worth) can have waited that long.
    low = 0.85 * rate * half
    high = rate * (t0 + config.duration - paused_at + 0.25)
    by_second = {row["second"]: row for row in report.latency_series}
    print(f"pause {measured_pause:.3f}s: {at_least_half} events >= {half:.3f}s "
          f"(expected {low:.0f}..{high:.0f}), max {report.latency_ms['max']} ms, "
          f"second 0 p50 {by_second[0]['p50']} ms")
    assert low <= at_least_half <= high
    # The whole first second was scheduled before the pause: it is not charged the stall.
    assert by_second[0]["p50"] < half * 1000
    # The stall shows where it happened in the per-second series.
    pause_second = int(paused_at - t0)
    by_second = {row["second"]: row for row in report.latency_series}
    assert by_second[pause_second]["max"] >= 500


@contextlib.contextmanager
def _first_record_watch(bootstrap: str, topic: str):
    """Yields ``wait(timeout) -> bool``: True once a record lands in ``topic`` after entry."""
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "lg-test-watch",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 5})
    consumer.assign(end_offsets(consumer, [topic], bootstrap))

    def wait(timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            message = consumer.poll(0.05)
            if message is not None and message.error() is None:
                return True
        return False

    try:
        yield wait
    finally:
        consumer.close()


def _recorded_values(histogram):
    return [item.value_iterated_to for item in histogram.get_recorded_iterator()]


def test_api_run_serves_prometheus_metrics_while_running(lg_bootstrap, lg_topics, relay):
    port = free_port()
    config = LoadConfig(bootstrap=lg_bootstrap, rate=300, duration=4.0, ramp=1.0,
                        alert_ratio=0.5, events_topic=lg_topics["events"],
                        alerts_topic=lg_topics["alerts"], dlq_topic=lg_topics["dlq"],
                        metrics_port=port, progress=False)
    runner, box = _run_in_thread(config)
    scraped = None
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and runner.is_alive():
        try:
            text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2).read()
        except OSError:
            time.sleep(0.2)
            continue
        metrics = _parse(text.decode())
        if metrics.get("loadgen_end_to_end_latency_seconds_count", 0) > 50:
            scraped = metrics
            break
        time.sleep(0.2)
    runner.join(timeout=60)
    assert scraped is not None, "no latency observations were exported while running"
    assert scraped["loadgen_events_sent_total"] > 0
    assert scraped["loadgen_alerts_received_total"] > 0
    assert scraped["loadgen_target_rate"] == 300
    assert 'loadgen_end_to_end_latency_seconds_bucket{le="0.0005"}' in scraped
    report = box["report"]
    # The ramp halves the first second's events: 300 * (1/2 + 3) events.
    assert report.sent == 1050 and report.lost == 0
    assert report.received_alerts == report.expected_alerts == 525


def _parse(text: str) -> dict:
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


def test_generator_asked_for_too_much_says_so(lg_bootstrap, lg_topics, lg_env, tmp_path):
    report_path = tmp_path / "absurd.json"
    proc = _loadgen(lg_env, "run", "--bootstrap", lg_bootstrap,
                    "--rate", "1000000", "--duration", "0.5", "--workers", "1",
                    "--alert-ratio", "0", *_topic_args(lg_topics), "--floor-seconds", "0",
                    "--grace", "1", "--report", str(report_path))
    assert proc.returncode == 0, proc.stderr
    report = json.loads(report_path.read_text())
    behind = report["behind_schedule"]
    assert behind["fell_behind"] is True
    assert behind["unsent"] > 0 and behind["late_events"] > 0
    assert report["sent"] + behind["unsent"] == report["scheduled"] == 500_000
    assert report["achieved_rate"] < 1_000_000
    assert "fell behind its schedule" in proc.stderr
    assert "Fell behind schedule" in report_path.with_suffix(".md").read_text()


def test_lost_and_duplicate_alerts_are_counted_exactly(lg_bootstrap, lg_topics, relay_factory,
                                                       lg_env, tmp_path):
    """The relay drops alerts of indices % 10 == 0 and doubles those % 7 == 0 (not % 10)."""
    from loadgen.events import EventFactory

    relay_factory("--drop-every", "10", "--duplicate-every", "7")
    report_path = tmp_path / "faulty.json"
    proc = _loadgen(lg_env, "run", "--bootstrap", lg_bootstrap,
                    "--rate", "400", "--duration", "2", "--alert-ratio", "0.5",
                    *_topic_args(lg_topics), "--floor-ms", "0.5", "--grace", "3",
                    "--report", str(report_path))
    assert proc.returncode == 3, proc.stderr  # documented: 3 = alerts were lost
    assert "LOST" in proc.stderr
    report = json.loads(report_path.read_text())
    factory = EventFactory(report["run_id"], 0.5, 0.0)
    alerting = [i for i in range(report["sent"]) if factory.kind(i).startswith("alert:")]
    dropped = [i for i in alerting if i % 10 == 0]
    doubled = [i for i in alerting if i % 7 == 0 and i % 10 != 0]
    assert report["expected_alerts"] == len(alerting)
    assert report["lost"] == len(dropped) > 0
    assert report["received_alerts"] == len(alerting) - len(dropped)
    assert report["duplicates"] == len(doubled) > 0
    assert report["floor_ms"] == {"source": "given", "p50": None, "p99": 0.5, "max": None,
                                  "rate": None}


def test_cli_exit_codes(lg_env):
    def loadgen(*args):
        return _loadgen(lg_env, *args, timeout=60)

    usage = loadgen("run", "--rate", "10")  # no --bootstrap / --duration
    assert usage.returncode == 2
    bad = loadgen("run", "--bootstrap", "127.0.0.1:9", "--rate", "10", "--duration", "1",
                  "--alert-ratio", "0.8", "--bad-ratio", "0.5")
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines() == [
        "loadgen run: --alert-ratio plus --bad-ratio must not exceed 1"]
    down = loadgen("floor", "--bootstrap", f"127.0.0.1:{free_port()}", "--rate", "10",
                   "--duration", "1")
    assert down.returncode == 1
    assert "cannot reach a Kafka broker" in down.stderr


def test_self_test_measures_the_instruments_floor(lg_bootstrap, lg_env, tmp_path):
    """``run --self-test``: produce to a topic and consume it back, no appliance between."""
    report_path = tmp_path / "floor.json"
    proc = _loadgen(lg_env, "run", "--self-test", "--bootstrap", lg_bootstrap,
                    "--rate", "300", "--duration", "1.5",
                    "--floor-topic", f"lg-floor-{tmp_path.name}", "--report", str(report_path),
                    timeout=60)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(report_path.read_text())
    assert report["mode"] == "floor"
    assert report["sent"] == report["expected_alerts"] == report["received_alerts"] == 450
    assert report["lost"] == 0 and report["latency_ms"]["count"] == 450
    assert 0 < report["latency_ms"]["p50"] <= report["latency_ms"]["max"] < 5000
    assert report["floor_ms"]["source"] == "this run"
    assert report["floor_ms"]["p99"] == report["latency_ms"]["p99"]
