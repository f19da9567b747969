"""``appliance watch``: the installed Prometheus and Alertmanager, started with the project's
scrape config and rules against a real metrics endpoint this test serves (as ``appliance
run`` serves its own, with the same library), scrape it, load every rule group, reach
each other, listen on loopback only, and stop on Ctrl-C (exit 0)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml
from ports import free_port
from prometheus_client import CollectorRegistry, Gauge, start_http_server

from appliance.broker.ready_line import read_until_line
from dashboards.watch import READY_PREFIX, RULES

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(300)



def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=5) as answer:
        return json.loads(answer.read())


def _until(what: str, check, timeout: float):
    """``check()``'s first truthy answer, polled for at most ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            found = check()
        except OSError:
            found = None
        if found:
            return found
        assert time.monotonic() < deadline, f"{what}: not within {timeout:g} s"
        time.sleep(0.5)


def _watch(*args: str) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith("APPLIANCE_")}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.Popen([sys.executable, "-m", "appliance", "watch", *args], cwd=ROOT,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


@pytest.fixture
def metrics_endpoint():
    """A real Prometheus endpoint with an ``appliance_*`` series, on a free port."""
    registry = CollectorRegistry()
    Gauge("appliance_query_up", "1 while the query runs", registry=registry).set(1)
    port = free_port()
    server, thread = start_http_server(port, addr="127.0.0.1", registry=registry)
    yield f"127.0.0.1:{port}"
    server.shutdown()
    thread.join(timeout=10)


def test_watch_scrapes_the_appliance_loads_the_rules_and_stops_on_ctrl_c(
        metrics_endpoint, tmp_path):
    prom_port, am_port = free_port(), free_port()
    proc = _watch("--prometheus-port", str(prom_port), "--alertmanager-port", str(am_port),
                  "--appliance", metrics_endpoint, "--scrape-interval", "1s",
                  "--data-dir", str(tmp_path / "watch"))
    prom, am = f"http://127.0.0.1:{prom_port}", f"http://127.0.0.1:{am_port}"
    try:
        ready, lines = read_until_line(proc.stdout, READY_PREFIX, 120)
        assert ready is not None, (lines, proc.stderr.read().decode() if proc.poll() else "")
        assert f"Prometheus {prom}" in ready and f"Alertmanager {am}" in ready

        def appliance_up():
            targets = _get(f"{prom}/api/v1/targets")["data"]["activeTargets"]
            return [t for t in targets if t["labels"]["job"] == "appliance"
                    and t["scrapeUrl"] == f"http://{metrics_endpoint}/metrics"
                    and t["health"] == "up"]
        _until("the appliance target scraped up", appliance_up, 60)
        series = _get(f"{prom}/api/v1/query?query=appliance_query_up")["data"]["result"]
        assert [s["value"][1] for s in series] == ["1"]

        shipped = {g["name"] for g in yaml.safe_load(RULES.read_text())["groups"]}
        loaded = {g["name"] for g in _get(f"{prom}/api/v1/rules")["data"]["groups"]}
        assert loaded == shipped

        def alertmanager_known():
            found = _get(f"{prom}/api/v1/alertmanagers")["data"]["activeAlertmanagers"]
            return [a for a in found if a["url"].startswith(am)]
        _until("Prometheus sends to the Alertmanager", alertmanager_known, 60)
        status = _get(f"{am}/api/v2/status")
        assert status["cluster"]["status"] == "disabled"  # no mesh port on every interface
        assert "- name: local" in status["config"]["original"]  # the config watch wrote
        flags = _get(f"{prom}/api/v1/status/flags")["data"]
        assert flags["web.listen-address"] == f"127.0.0.1:{prom_port}"
        assert flags["storage.tsdb.path"] == str(tmp_path / "watch" / "prometheus")
    finally:
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=60)
    assert code == 0, proc.stderr.read().decode()
    for port in (prom_port, am_port):  # both servers are gone
        with socket.socket() as s, pytest.raises(OSError):
            s.connect(("127.0.0.1", port))


def test_watch_on_a_taken_port_exits_2_with_one_line(tmp_path):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        proc = _watch("--prometheus-port", str(port), "--alertmanager-port",
                      str(free_port()), "--data-dir", str(tmp_path / "watch"))
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2, err
    assert err.decode().splitlines() == [
        f"appliance watch: --prometheus-port {port}: 127.0.0.1:{port} is already in use "
        f"(another watch, or a Prometheus?); name a free one with --prometheus-port"]
