"""The README's quick start, run as written on a terminal: ``appliance run`` with the
example config, the README's Locust line against it, the metrics command, ``make watch``
(Prometheus and Alertmanager) and the dashboards rendered from it, then Ctrl-C to each.

One ``appliance run`` (one JVM) serves every check. It listens where the README says,
127.0.0.1:9092 and :9464: this is the one test of the suite that uses those fixed ports
(every other starts the embedded broker on a free port), and of 9090 and :9093 (``make
watch``), and it waits, bounded, while another checkout's run of it holds them. The
environment only moves the appliance's state (checkpoint, and with it the log file) into
the test's directory; the commands are the README's. Locust's run is shortened to 5 s
and writes its CSV (``LOCUST_CSV``).
"""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import time
import urllib.request

import pytest

from appliance.process.logwatch import last_event, log_events
from dashboards import catalog

from support.quickstart.quickstart_blocks import (
    ROOT,
    SPARK_WARNING,
    alarming,
    block,
    blocks,
    shortened,
    user_env,
    wait_until_free,
)
from support.terminal import Terminal

PORTS = [9092, 9464]  # examples/appliance.toml: the embedded broker's default, metrics
WATCH_PORTS = [9090, 9093]  # make watch: Prometheus, Alertmanager
READY_S = 900  # a bound, not an expectation: a JVM start on a machine shared with others
# How long the watch must stay quiet beside the healthy appliance: no alert pending or
# firing but the Watchdog (which always fires). `make watch-quiet` holds it 5 minutes.
WATCH_QUIET_S = float(os.environ.get("WATCH_QUIET_S", "60"))


def test_every_marked_block_is_run_by_a_test():
    assert set(blocks()) == {"make-demo", "appliance-run", "locust", "metrics", "watch",
                             "render"}


def test_what_reads_as_trouble_on_a_terminal():
    for line in ("26/11/25 08:38:12 WARN TaskSetManager: Lost task 0.0 in stage 4.0",
                 "WARNING: Using incubator modules: jdk.incubator.vector",
                 "2026-11-25T09:24:57Z [warning  ] query.restarting   cause=...",
                 "2026-11-25T09:24:57Z [error    ] appliance.failed   error=...",
                 "spark ERROR Executor: Exception in task 0.0 (boom)",
                 "Traceback (most recent call last):"):
        assert alarming(line), line
    assert alarming("2026-11-25T09:24:57Z [warning  ] kafka.io_step_slow   seconds=0.2") == []
    assert alarming("loadgen: WARNING generator fell behind its schedule: max lag 119.8 ms") \
        == []
    assert alarming("2026-11-25T09:24:44Z [info     ] appliance.ready   rules=3") == []


def _metrics() -> dict[str, float]:
    run = subprocess.run(["bash", "-e", "-c", block("metrics")], cwd=ROOT, env=user_env(),
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    return {name: float(value) for name, value in
            (line.split()[:2] for line in run.stdout.splitlines() if line.strip())}


def _locust(tmp_path) -> dict[tuple[str, str], dict]:
    prefix = tmp_path / "locust"
    run = subprocess.run(
        ["bash", "-e", "-c", shortened(block("locust"), {"-t 20s": "-t 5s"})], cwd=ROOT,
        env=user_env(LOCUST_CSV=str(prefix), LOCUST_ONLY_SUMMARY="true"),
        capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "Traceback" not in run.stderr, run.stderr[-3000:]
    with open(f"{prefix}_stats.csv", newline="") as f:
        return {(r["Type"], r["Name"]): r for r in csv.DictReader(f)}


def _appliance_scraped_up() -> bool:
    """Prometheus of ``make watch`` has scraped the appliance, and it was up."""
    url = "http://127.0.0.1:9090/api/v1/query?query=up%7Bjob%3D%22appliance%22%7D"
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            result = json.loads(answer.read())["data"]["result"]
    except OSError:
        return False
    return [r["value"][1] for r in result] == ["1"]


def _alerts_but_the_watchdog() -> list[str]:
    """Alerts ``make watch``'s Prometheus has pending or firing, but the Watchdog."""
    with urllib.request.urlopen("http://127.0.0.1:9090/api/v1/alerts", timeout=5) as answer:
        alerts = json.loads(answer.read())["data"]["alerts"]
    return [f"{a['labels']['alertname']} {a['state']} {a['labels'].get('job', '')}"
            for a in alerts if a["labels"]["alertname"] != "Watchdog"]


def _watch_and_render(tmp_path) -> None:
    """``make watch`` as written, the appliance scraped up, the README's render line, then
    Ctrl-C: Prometheus and Alertmanager stop (make itself reports the interrupt)."""
    watch = Terminal(["bash", "-e", "-c", block("watch")], ROOT, user_env(),
                     tmp_path / "watch.txt")
    try:
        ready = watch.wait_for(r"watch ready: [^\n]*\n", 600).group(0)
        assert "Prometheus http://127.0.0.1:9090" in ready, ready
        assert "Alertmanager http://127.0.0.1:9093" in ready, ready
        deadline = time.monotonic() + 120
        while not _appliance_scraped_up():
            assert time.monotonic() < deadline, "Prometheus never scraped the appliance up"
            time.sleep(1.0)
        # Issue 52: beside the quick start's appliance alone, the watch scraped a broker,
        # loadgen and Spark that do not run there, and BrokerDown and SparkWorkerLost fired.
        quiet_until = time.monotonic() + WATCH_QUIET_S
        while time.monotonic() < quiet_until:
            assert _alerts_but_the_watchdog() == []
            time.sleep(5.0)
        render = subprocess.run(["bash", "-e", "-c", block("render")], cwd=ROOT,
                                env=user_env(), capture_output=True, text=True, timeout=600)
        assert render.returncode == 0, render.stdout + render.stderr
        boards = catalog.load()
        assert f"rendered {len(boards)} dashboards into reports/dashboards" in render.stdout
        for board in boards:
            assert (ROOT / "reports" / "dashboards" / f"{board.uid}.png").stat().st_size > 0
    finally:
        if watch.proc.poll() is None:
            watch.ctrl_c()
        watch.wait(timeout=120)
        watch.close()
    assert "watch: stopped Prometheus and Alertmanager" in watch.text(), watch.text()[-3000:]
    assert "Traceback" not in watch.text()


@pytest.mark.timeout(2400)  # bounds: the ports' wait, a JVM start, 5 s of load, the stop
def test_readme_commands_run_load_watch_and_stop(tmp_path):
    wait_until_free(PORTS + WATCH_PORTS, timeout=900)
    state = tmp_path / "state"
    env = user_env(APPLIANCE_QUERY_CHECKPOINT_DIR=str(state / "checkpoints"))
    log_file = state / "log" / "appliance.log"  # beside the checkpoint (appliance.cli)
    term = Terminal(["bash", "-e", "-c", block("appliance-run")], ROOT, env,
                    tmp_path / "terminal.txt")
    try:
        ready = term.wait_for(r"appliance ready: [^\n]*\n", READY_S).group(0)
        assert "Kafka 127.0.0.1:9092 (embedded broker)" in ready
        assert "events in events, alerts out alerts, dead letters events.dlq" in ready
        assert "metrics http://127.0.0.1:9464/metrics" in ready
        assert f"full log {log_file}" in ready
        assert "Load it: loadgen run --bootstrap-server 127.0.0.1:9092 " in ready
        assert last_event(log_file, "appliance.ready")["bootstrap"] == "127.0.0.1:9092"

        # A second appliance on the same config finds the port taken: one line, exit 2,
        # before any JVM starts.
        second = subprocess.run(
            [str(ROOT / ".venv" / "bin" / "appliance"), "run", "--config",
             "examples/appliance.toml"], cwd=ROOT, capture_output=True, text=True,
            timeout=300, env=user_env(APPLIANCE_QUERY_CHECKPOINT_DIR=str(tmp_path / "cp2")))
        assert second.returncode == 2, second.stderr
        said = [line for line in second.stderr.splitlines() if not line.startswith("{")]
        assert said == [
            "kafka.embedded_port: 127.0.0.1:9092 is already in use (another broker or "
            "appliance?); set [kafka] embedded_port (or APPLIANCE_KAFKA_EMBEDDED_PORT) to a "
            "free port, 0 for any, or bootstrap_servers to use the Kafka that is there"]
        assert "spark.ready" not in second.stderr

        rows = _locust(tmp_path)
        produce, alerts = rows[("kafka", "produce")], rows[("alert", "end_to_end")]
        assert int(produce["Request Count"]) > 0 and int(produce["Failure Count"]) == 0
        assert int(alerts["Request Count"]) > 0 and int(alerts["Failure Count"]) == 0

        metrics = _metrics()
        assert metrics["appliance_events_read_total"] > 0, metrics
        assert metrics["appliance_alerts_written_total"] > 0, metrics

        _watch_and_render(tmp_path)
    finally:
        if term.proc.poll() is None:
            term.ctrl_c()
        code = term.wait(timeout=300)
        term.close()

    shown = term.text()
    assert code == 0, shown[-4000:]
    assert re.search(r"appliance\.stopped\s+component=appliance exit_code=0", shown), shown
    assert not alarming(shown), f"{alarming(shown)}\n{shown[-4000:]}"
    # The log file has it all: our events as JSON, Spark's warnings in Spark's own layout.
    assert last_event(log_file, "appliance.stopped")["exit_code"] == 0
    assert {e["event"] for e in log_events(log_file)} >= {
        "broker.ready", "spark.ready", "query.started", "appliance.stopping", "broker.stopped"}
    assert SPARK_WARNING.search(log_file.read_text()), "no Spark WARN line in the log file"
