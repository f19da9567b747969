"""The whole product against a SASL_SSL broker, from the outside, with the CLI only.

``appliance broker`` listens with TLS and SCRAM; ``appliance run`` (its connector's Java
clients and its kafka-python admin and metrics clients) logs in with SCRAM-SHA-512, the
password coming from the environment; ``loadgen run`` and Locust log in with
SCRAM-SHA-256, the password in a 0600 settings file. The load generator gets every alert
and dead letter it expects; Locust's producer and alert consumer log in and send.
Meanwhile the test looks for the password everywhere it must
not be - every process's command line, every log, the metrics pages, the checkpoint, the
reports, an appliance refused for a wrong password - and checks that every listening
socket of the broker, the appliance (its JVM included) and the load generator is bound
to loopback.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from appliance.broker import EmbeddedBroker
from appliance.process.logwatch import log_events, wait_for_event

from support.child_env import child_env
from support.ports import free_port
from support.secure_helpers import (
    USER,
    broker_args,
    cmdlines_containing,
    files_containing,
    is_loopback,
    listening_addresses,
    make_tls,
    make_users,
    new_password,
    process_tree,
    secured_appliance_config,
    write_private,
)

# Micro-batch: the security path is the same in every trigger, and continuous mode's epoch
# RPCs time out on a badly overloaded host. Minutes only there; about two when quiet.
pytestmark = [pytest.mark.spark, pytest.mark.timeout(1800)]

ROOT = Path(__file__).resolve().parents[2]
LOCUST = Path(sys.executable).with_name("locust")
TOPICS = "events:2,alerts:1,events.dlq:1"  # the appliance's default topic names


def _appliance_config(tmp_path: Path, name: str, bootstrap: str, ca: Path) -> Path:
    return secured_appliance_config(tmp_path / f"{name}.toml", bootstrap, {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": USER, "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(ca)}, checkpoint=f"{name}-checkpoint")


def _loadgen_config(tmp_path: Path, password: str, ca: Path) -> Path:
    # The Java spelling (sasl.jaas.config), translated for librdkafka by the load generator.
    jaas = (f'org.apache.kafka.common.security.scram.ScramLoginModule required '
            f'username="{USER}" password="{password}";')
    return write_private(tmp_path / "loadgen.toml", f"""
[kafka]
"security.protocol" = "SASL_SSL"
"sasl.mechanism" = "SCRAM-SHA-256"
"sasl.jaas.config" = '{jaas}'
"ssl.truststore.type" = "PEM"
"ssl.truststore.location" = "{ca}"
""")


def _scram_256_logins(broker_log: Path) -> int:
    """SCRAM-SHA-256 logins the broker accepted so far (the load generator's mechanism)."""
    return sum(1 for e in log_events(broker_log) if e.get("event") == "broker.authenticated"
               and e.get("mechanism") == "SCRAM-SHA-256")



def _get(url: str) -> str:
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    return direct.open(url, timeout=5).read().decode()


class Watcher(threading.Thread):
    """While the product runs: command lines never hold the password; remember every
    listening address of the watched process trees and the load generator's metrics page."""

    def __init__(self, password: str, roots: list[int], loadgen_metrics_port: int):
        super().__init__(daemon=True)
        self.password = password
        self.roots = list(roots)
        self.port = loadgen_metrics_port
        self.cmdline_hits: list[str] = []
        self.listening: dict[int, set[str]] = {}
        self.loadgen_metrics = ""
        self.rounds = 0
        self._halt = threading.Event()

    def watch(self, pid: int) -> None:
        self.roots.append(pid)

    def run(self) -> None:
        deadline = time.monotonic() + 600
        while not self._halt.is_set() and time.monotonic() < deadline:
            self.rounds += 1
            self.cmdline_hits += cmdlines_containing(self.password)
            pids = set().union(*(process_tree(p) for p in list(self.roots)))
            for pid, addrs in listening_addresses(pids).items():
                self.listening.setdefault(pid, set()).update(addrs)
            try:
                page = _get(f"http://127.0.0.1:{self.port}/metrics")
                if "loadgen_" in page:
                    self.loadgen_metrics = page
            except OSError:
                pass
            self._halt.wait(0.5)

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=30)


def test_appliance_loadgen_and_locust_over_sasl_ssl_leak_no_secret(tmp_path):
    tls = make_tls(tmp_path / "tls")
    password = new_password()
    users = make_users(tmp_path / "users.toml", password)
    shutil.copy(ROOT / "examples" / "rules.yml", tmp_path / "rules.yml")
    logs = tmp_path / "logs"
    logs.mkdir()
    broker = EmbeddedBroker(extra_args=broker_args("SASL_SSL", tls, users)
                            + ["--topics", TOPICS], log_path=logs / "broker.log")
    broker.start()
    procs: list[subprocess.Popen] = []
    try:
        good = _appliance_config(tmp_path, "appliance", broker.bootstrap, tls.ca)
        bad = _appliance_config(tmp_path, "refused", broker.bootstrap, tls.ca)
        wrong = "not-" + password
        app_log, refused_log = logs / "appliance.log", logs / "refused.log"
        with app_log.open("wb") as out:
            app = subprocess.Popen(
                [sys.executable, "-m", "appliance", "run", "--config", str(good)],
                stdout=out, stderr=subprocess.STDOUT, cwd=tmp_path, start_new_session=True,
                env=child_env(APPLIANCE_KAFKA_SASL_PASSWORD=password))
        procs.append(app)
        with refused_log.open("wb") as out:  # same settings, wrong password: refused
            refused = subprocess.Popen(
                [sys.executable, "-m", "appliance", "run", "--config", str(bad)],
                stdout=out, stderr=subprocess.STDOUT, cwd=tmp_path, start_new_session=True,
                env=child_env(APPLIANCE_KAFKA_SASL_PASSWORD=wrong))
        procs.append(refused)
        lg_port = free_port()
        watcher = Watcher(password, [broker.proc.pid, app.pid], lg_port)
        watcher.start()

        ready = wait_for_event(app_log, "appliance.ready", app, 600)  # loaded CI: slow JVM
        metrics_port = ready["metrics_port"]

        lg_settings = _loadgen_config(tmp_path, password, tls.ca)
        report = tmp_path / "reports" / "secured.json"
        lg_out, lg_err = logs / "loadgen.out", logs / "loadgen.err"
        with lg_out.open("wb") as out, lg_err.open("wb") as err:
            lg = subprocess.Popen(
                [sys.executable, "-m", "loadgen", "run", "--bootstrap", broker.bootstrap,
                 "--rate", "200", "--duration", "6", "--alert-ratio", "0.2",
                 "--bad-ratio", "0.05", "--floor-seconds", "0", "--grace", "400",
                 "--metrics-port", str(lg_port), "--kafka-config", str(lg_settings),
                 "--quiet", "--report", str(report)],
                stdout=out, stderr=err, cwd=tmp_path, env=child_env())
            procs.append(lg)
            watcher.watch(lg.pid)
            lg_code = lg.wait(timeout=600)
        summary = json.loads(lg_out.read_text())
        assert lg_code == 0, (lg_err.read_text()[-2000:] + "\n--- appliance log tail:\n"
                              + app_log.read_text(errors="replace")[-6000:])
        print(f"secured run: {summary['sent']} events, {summary['received_alerts']} of "
              f"{summary['expected_alerts']} alerts, {summary['dlq_received']} of "
              f"{summary['dlq_expected']} dead letters, {summary['duplicates']} duplicates")
        assert summary["lost"] == 0
        assert summary["expected_alerts"] > 0
        assert summary["received_alerts"] == summary["expected_alerts"]
        assert summary["dlq_received"] == summary["dlq_expected"] > 0

        locust_prefix = tmp_path / "locust"
        logins_before = _scram_256_logins(logs / "broker.log")
        locust = subprocess.run(
            [str(LOCUST), "-f", str(ROOT / "loadgen" / "locustfile.py"), "--headless",
             "-u", "4", "-r", "4", "-t", "10s", "--host", broker.bootstrap,
             "--csv", str(locust_prefix), "--only-summary"],
            capture_output=True, text=True, timeout=120, cwd=tmp_path,
            env=child_env(LOADGEN_KAFKA_CONFIG=str(lg_settings), LOADGEN_ALERT_RATIO="0.5"))
        (logs / "locust.out").write_text(locust.stdout + locust.stderr)
        assert locust.returncode == 0, locust.stderr[-3000:]
        with open(f"{locust_prefix}_stats.csv", newline="") as f:
            rows = {(r["Type"], r["Name"]): r for r in csv.DictReader(f)}
        produced = rows[("kafka", "produce")]
        assert int(produced["Request Count"]) > 0 and int(produced["Failure Count"]) == 0
        # Its alert consumer read the alerts topic's end offsets before any user started
        # (else no user runs); both of its clients logged in. Alerts reaching Locust within
        # its few seconds depend on the host's load, so they are not asserted here.
        assert "Traceback" not in locust.stderr
        assert _scram_256_logins(logs / "broker.log") >= logins_before + 2

        appliance_metrics = _get(f"http://127.0.0.1:{metrics_port}/metrics")
        assert "appliance_alerts_written_total" in appliance_metrics

        assert refused.wait(timeout=120) == 1  # a runtime failure, for its supervisor
        failed = [e for e in log_events(refused_log) if e.get("event") == "appliance.failed"]
        assert failed, refused_log.read_text()[-3000:]

        app.send_signal(signal.SIGTERM)
        assert app.wait(timeout=120) == 0
        watcher.stop()
    finally:
        for proc in procs:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:  # loadgen shares our group; kill it alone
                    proc.kill()
                proc.wait(timeout=30)
        broker.stop()

    # -- nobody in: every listening socket was on loopback ---------------------------------
    seen = {addr for addrs in watcher.listening.values() for addr in addrs}
    print(f"listening sockets seen over {watcher.rounds} rounds: {sorted(seen)}")
    assert broker.bootstrap in seen  # the audit did see the product's sockets
    assert f"127.0.0.1:{metrics_port}" in seen and f"127.0.0.1:{lg_port}" in seen
    assert [a for a in seen if not is_loopback(a)] == []

    # -- and no secret out: argv, logs, metrics, checkpoint, reports -----------------------
    assert watcher.loadgen_metrics, "the load generator's metrics page was never scraped"
    assert watcher.cmdline_hits == []
    for secret in (password, wrong):
        assert secret not in appliance_metrics and secret not in watcher.loadgen_metrics
        assert files_containing(secret, logs, tmp_path / "appliance-checkpoint",
                                tmp_path / "refused-checkpoint", report.parent) == []
    assert "broker.authentication_failed" in (logs / "broker.log").read_text()
