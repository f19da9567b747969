"""Locust drives the same load headless and reports both request types in its CSV; an
alert that never comes is a failure row; its web UI takes the load's settings (users,
rate per user, alert and bad-record ratios); and a Kafka that is not there or lacks the
topics stops a run at once, with one line."""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from datetime import datetime
from pathlib import Path

from support.ports import free_port

LOCUST = Path(sys.executable).with_name("locust")
# Locust's own log lines: "[2026-11-25 09:00:02,433] host/LEVEL/logger: message".
LOG_LINE = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\] [^/]+/(\w+)/([\w.]+): (.*)$")



def _locust_env(lg_env, lg_topics) -> dict[str, str]:
    env = {k: v for k, v in lg_env.env.items() if not k.startswith(("LOCUST_", "LOADGEN_"))}
    env.update(LOADGEN_EVENTS_TOPIC=lg_topics["events"],
               LOADGEN_ALERTS_TOPIC=lg_topics["alerts"], LOADGEN_DLQ_TOPIC=lg_topics["dlq"])
    return env


def _headless(lg_env, env, host: str, *extra: str, timeout: float = 90,
              flag: str = "--host"):
    return subprocess.run(
        [str(LOCUST), "-f", str(lg_env.root / "loadgen" / "locustfile.py"), "--headless",
         "-u", "10", "-r", "5", flag, host, "--only-summary", *extra],
        capture_output=True, text=True, timeout=timeout, cwd=lg_env.root, env=env)


def _csv_rows(path: str) -> dict[tuple[str, str], dict]:
    with open(path, newline="") as f:
        return {(r["Type"], r["Name"]): r for r in csv.DictReader(f)}


def test_locust_headless_reports_produce_and_end_to_end(lg_bootstrap, lg_topics, relay,
                                                        lg_env, tmp_path):
    env = _locust_env(lg_env, lg_topics)
    env.update(LOADGEN_ALERT_RATIO="0.5")  # the custom argument's environment spelling
    prefix = tmp_path / "locust"
    proc = _headless(lg_env, env, lg_bootstrap, "-t", "8s", "--csv", str(prefix),
                     "--exit-code-on-error", "1")
    assert proc.returncode == 0, proc.stderr[-3000:]
    with open(f"{prefix}_stats.csv", newline="") as f:
        rows = {(r["Type"], r["Name"]): r for r in csv.DictReader(f)}
    produce, alerts = rows[("kafka", "produce")], rows[("alert", "end_to_end")]
    assert int(produce["Request Count"]) > 100 and int(produce["Failure Count"]) == 0
    # Half the events match a rule; alerts still in flight at the stop are not counted.
    assert int(alerts["Request Count"]) > 0.3 * int(produce["Request Count"])
    assert 0 < float(alerts["Median Response Time"]) < 5000
    assert ("dead_letter", "end_to_end") not in rows  # --bad-ratio defaults to 0
    # The relay answered every event: at the stop, the answers still due were waited for.
    assert int(alerts["Failure Count"]) == 0


def test_locust_counts_every_alert_that_never_comes_as_a_failure(lg_bootstrap, lg_topics,
                                                                lg_env, tmp_path):
    """Nothing reads the events (no appliance, no relay): every alert and dead letter owed
    is a failure of its row once --alert-timeout is up, the produce row stays clean, and
    the run exits 3 (answers lost), as ``loadgen run`` does."""
    env = _locust_env(lg_env, lg_topics)
    prefix = tmp_path / "missing"
    started = time.monotonic()
    proc = _headless(lg_env, env, lg_bootstrap, "-t", "3s", "--csv", str(prefix),
                     "--alert-ratio", "0.5", "--bad-ratio", "0.2", "--alert-timeout", "1s",
                     flag="--bootstrap-server")
    took = time.monotonic() - started
    assert proc.returncode == 3, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    rows = _csv_rows(f"{prefix}_stats.csv")
    produce = rows[("kafka", "produce")]
    alerts, dead = rows[("alert", "end_to_end")], rows[("dead_letter", "end_to_end")]
    sent = int(produce["Request Count"])
    assert sent > 50 and int(produce["Failure Count"]) == 0
    # Every owed answer is counted once, as a failure: about half alerts, a fifth dead
    # letters (a low-discrepancy sequence of kinds: off by a few at most).
    assert int(alerts["Failure Count"]) == int(alerts["Request Count"])
    assert int(dead["Failure Count"]) == int(dead["Request Count"])
    assert abs(int(alerts["Request Count"]) - 0.5 * sent) <= 5
    assert abs(int(dead["Request Count"]) - 0.2 * sent) <= 5
    with open(f"{prefix}_failures.csv", newline="") as f:
        failures = {(r["Method"], r["Name"]): r for r in csv.DictReader(f)}
    assert failures[("alert", "end_to_end")]["Error"] == "MissingAnswer('no alert within 1 s')"
    assert failures[("dead_letter", "end_to_end")]["Error"] == \
        "MissingAnswer('no dead letter within 1 s')"
    # The stop waited for the last answers' second, no longer (bound: interpreter start).
    assert took < 3 + 1 + 30, took


def _stops_with_one_line(proc, address: str, cause: str) -> None:
    """Exit 1, one error line naming the address and the cause, within 10 s of Locust's
    start (its own log clock: the interpreter's start-up is not the run), no traceback
    and no request at all."""
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and "KeyError" not in proc.stderr, proc.stderr
    lines = [LOG_LINE.match(line) for line in proc.stderr.splitlines()]
    logged = [m for m in lines if m]
    errors = [m.group(4) for m in logged if m.group(2) == "ERROR"]
    assert len(errors) == 1, proc.stderr
    assert address in errors[0] and cause in errors[0], errors[0]
    clock = [datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f") for m in logged]
    assert (clock[-1] - clock[0]).total_seconds() < 10, proc.stderr
    assert re.search(r"Aggregated\s+0\s", proc.stdout + proc.stderr)


def test_locust_against_no_kafka_stops_at_once_with_one_line(lg_env, lg_topics):
    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    proc = _headless(lg_env, _locust_env(lg_env, lg_topics), address, "-t", "60s")
    _stops_with_one_line(proc, f"cannot reach Kafka at {address}", "Connection refused")


def test_locust_without_the_topics_stops_at_once_with_one_line(lg_bootstrap, lg_topics,
                                                               lg_env):
    env = _locust_env(lg_env, lg_topics)
    env.update(LOADGEN_ALERTS_TOPIC=f"{lg_topics['alerts']}-absent")
    proc = _headless(lg_env, env, lg_bootstrap, "-t", "60s")
    _stops_with_one_line(proc, f"topics missing on Kafka at {lg_bootstrap}",
                         f"{lg_topics['alerts']}-absent")


def test_locust_rejects_a_bad_ratio_before_sending(lg_bootstrap, lg_topics, lg_env):
    proc = _headless(lg_env, _locust_env(lg_env, lg_topics), lg_bootstrap, "-t", "60s",
                     "--alert-ratio", "0.8", "--bad-ratio", "0.5")
    _stops_with_one_line(proc, "--alert-ratio plus --bad-ratio", "must not exceed 1")


class WebUI:
    """Locust's web UI, driven through the HTTP API its pages use."""

    def __init__(self, port: int):
        self.base = f"http://127.0.0.1:{port}"

    def get(self, path: str) -> bytes:
        with urllib.request.urlopen(self.base + path, timeout=10) as answer:
            return answer.read()

    def post(self, path: str, form: dict[str, str] | None = None) -> dict:
        data = urllib.parse.urlencode(form or {}).encode()
        with urllib.request.urlopen(self.base + path, data=data, timeout=10) as answer:
            return json.loads(answer.read())

    def stats(self) -> dict:
        return json.loads(self.get("/stats/requests"))

    def wait_up(self, proc, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.get("/")
                return
            except OSError:
                assert proc.poll() is None, "locust exited before serving its web UI"
                assert time.monotonic() < deadline, "Locust's web UI did not answer"
                time.sleep(0.3)


def _rows(stats: dict) -> dict[tuple[str, str], dict]:
    return {(s["method"], s["name"]): s for s in stats["stats"]}


def test_locust_web_ui_sets_the_load_and_reports_it(lg_bootstrap, lg_topics, relay, lg_env,
                                                    tmp_path):
    port = free_port()
    log = tmp_path / "locust.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(LOCUST), "-f", str(lg_env.root / "loadgen" / "locustfile.py"),
             "--web-port", str(port), "--host", lg_bootstrap],
            stdout=out, stderr=subprocess.STDOUT, cwd=lg_env.root,
            env=_locust_env(lg_env, lg_topics))
    ui = WebUI(port)
    try:
        ui.wait_up(proc, timeout=60)
        # The locustfile keeps the UI on loopback (Locust's own default: every interface).
        assert f"Starting web interface at http://127.0.0.1:{port}" in log.read_text()
        page = ui.get("/").decode()
        for name in ("user_rate", "alert_ratio", "bad_ratio"):  # the form's custom fields
            assert name in page, name
        # No event matches a rule and every third is malformed: only dead letters answer.
        started = ui.post("/swarm", {"user_count": "2", "spawn_rate": "2",
                                     "host": lg_bootstrap, "user_rate": "25",
                                     "alert_ratio": "0", "bad_ratio": "0.34"})
        assert started["success"], started
        deadline = time.monotonic() + 60
        while True:
            rows = _rows(ui.stats())
            produce = rows.get(("kafka", "produce"), {}).get("num_requests", 0)
            dead = rows.get(("dead_letter", "end_to_end"), {}).get("num_requests", 0)
            if produce >= 100 and dead >= 20:
                break
            assert time.monotonic() < deadline, (rows, log.read_text()[-3000:])
            time.sleep(0.5)
        assert ui.post("/stop")["success"]
        deadline = time.monotonic() + 30
        while (stats := ui.stats())["state"] != "stopped":  # the stop runs in a greenlet
            assert time.monotonic() < deadline, stats["state"]
            time.sleep(0.3)
        rows = _rows(stats)
        assert stats["user_count"] == 0
        assert ("alert", "end_to_end") not in rows  # --alert-ratio 0 from the form
        produce, dead = rows[("kafka", "produce")], rows[("dead_letter", "end_to_end")]
        assert produce["num_failures"] == 0 and dead["num_failures"] == 0
        # About a third of the events were bad (the kinds follow a low-discrepancy
        # sequence: a few off at most); some dead letters may still have been on the way.
        assert 0.15 * produce["num_requests"] < dead["num_requests"] \
            <= 0.34 * produce["num_requests"] + 10
        assert 0 < dead["median_response_time"] < 5000
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert "Traceback" not in log.read_text()


#: Locust's CSV writer, its files closed under it as Locust's shutdown does, then given a
#: round of the loop (``CSV_STATS_INTERVAL_SEC``). A subprocess: importing Locust
#: monkey-patches the interpreter with gevent.
CSV_AFTER_CLOSE = """
import sys
import gevent
{patch}
from locust.env import Environment
from locust.stats import CSV_STATS_INTERVAL_SEC, PERCENTILES_TO_REPORT, StatsCSVFileWriter
writer = StatsCSVFileWriter(Environment(), PERCENTILES_TO_REPORT, sys.argv[1])
loop = gevent.spawn(writer.stats_writer)
gevent.sleep(0.1)
writer.close_files()
loop.join(timeout=CSV_STATS_INTERVAL_SEC + 1.0)
print("ended", loop.dead, type(loop.exception).__name__)
"""


def test_the_csv_writer_ends_quietly_once_locust_closed_its_files(tmp_path):
    """``loadgen.locust_csv`` (the locustfile imports it): Locust's own writer raises on
    its closed files (the Traceback a run's end printed once); with it, the loop ends."""
    def run(name: str, patch: str) -> str:
        done = subprocess.run([sys.executable, "-c", CSV_AFTER_CLOSE.format(patch=patch),
                               str(tmp_path / name)],
                              capture_output=True, text=True, timeout=60)
        return done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr

    assert run("patched", "import loadgen.locust_csv") == "ended True NoneType"
    assert run("locust-alone", "") == "ended True ValueError"
