"""``appliance watch``: the installed Prometheus and Alertmanager, started with the project's
scrape config and rules against a real metrics endpoint this test serves (as ``appliance
run`` serves its own, with the same library), scrape it, load every rule group, reach
each other, listen on loopback only, and stop on Ctrl-C (exit 0); scrape only what runs
(no alert while all is well), pick up a broker that starts later, and die with the watch
whatever kills it."""

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
from prometheus_client import CollectorRegistry, Gauge, start_http_server

from appliance.broker.ready_line import read_until_line
from dashboards.watch import READY_PREFIX, RULES, WatchSettings, prometheus_config
from dashboards.watch_components import COMPONENTS

from support.ports import free_port

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


def test_the_scrape_config_takes_every_jobs_targets_from_the_watchs_files(tmp_path):
    settings = WatchSettings(tmp_path, 9090, 9093, {"appliance": "127.0.0.1:9464"}, 5.0, "1d")
    config = prometheus_config(settings)
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    assert set(jobs) == {job for c in COMPONENTS for job in c.jobs}
    for name, job in jobs.items():
        assert "static_configs" not in job
        assert job["file_sd_configs"] == [{"files": [str(tmp_path / "targets" / f"{name}.json")],
                                           "refresh_interval": "5000ms"}]


def test_a_relative_data_dir_gives_prometheus_absolute_target_files(tmp_path, monkeypatch):
    """``--data-dir var/watch`` (the default) is relative to where the watch runs; the
    config Prometheus reads lives in it, and Prometheus resolves a relative file_sd path
    from the config file's folder: the quick start's appliance was never scraped."""
    monkeypatch.chdir(tmp_path)
    settings = WatchSettings(Path("var/watch"), 9090, 9093, {"appliance": "127.0.0.1:9464"},
                             5.0, "1d")
    for job in prometheus_config(settings)["scrape_configs"]:
        path = Path(job["file_sd_configs"][0]["files"][0])
        assert path.is_absolute(), job
        assert path.parent == tmp_path / "var" / "watch" / "targets", job


def _watch_in_process_settings(prom_port: int, am_port: int, appliance: str,
                               look_for: dict[str, str], data_dir: Path) -> subprocess.Popen:
    """``run_watch`` as ``appliance watch`` runs it, but looking for the other components
    at free ports of the test's, not at their defaults (something else may run there)."""
    code = ("import sys; from pathlib import Path; "
            "from dashboards.watch import WatchSettings, run_watch; "
            f"sys.exit(run_watch(WatchSettings(Path({str(data_dir)!r}), {prom_port}, "
            f"{am_port}, {{'appliance': {appliance!r}}}, 1.0, '1d', {look_for!r})))")
    env = {k: v for k, v in os.environ.items() if not k.startswith("APPLIANCE_")}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _active(prom: str) -> list[dict]:
    """Alerts pending or firing, but the Watchdog (always firing, by design)."""
    alerts = _get(f"{prom}/api/v1/alerts")["data"]["alerts"]
    return [a for a in alerts if a["labels"]["alertname"] != "Watchdog"]


def _refused(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


QUIET_S = 20.0  # at 1 s evaluations: an alert whose expression holds is pending in 2


def test_only_what_runs_is_scraped_a_broker_found_later_is_kept_and_kill_9_takes_both(
        metrics_endpoint, tmp_path):
    """Issue 52: beside the quick start's appliance, the watch scraped a broker, loadgen and
    five Spark jobs that were not running, so BrokerDown (critical) and SparkWorkerLost
    fired after a minute; a kill -9 of the watch left Prometheus and Alertmanager running."""
    prom_port, am_port, broker_metrics = free_port(), free_port(), free_port()
    look_for = {"broker": f"127.0.0.1:{broker_metrics}", "loadgen": f"127.0.0.1:{free_port()}",
                "spark-master": f"127.0.0.1:{free_port()}",
                "spark-worker": f"127.0.0.1:{free_port()}",
                "spark-driver": f"127.0.0.1:{free_port()}"}
    proc = _watch_in_process_settings(prom_port, am_port, metrics_endpoint, look_for,
                                      tmp_path / "watch")
    prom = f"http://127.0.0.1:{prom_port}"
    broker = None
    try:
        ready, lines = read_until_line(proc.stdout, READY_PREFIX, 120)
        assert ready is not None, (lines, proc.stderr.read().decode() if proc.poll() else "")

        def scraped() -> dict[str, str]:
            series = _get(f"{prom}/api/v1/query?query=up")["data"]["result"]
            return {s["metric"]["job"]: s["value"][1] for s in series}
        _until("the appliance scraped up", lambda: scraped() == {"appliance": "1"}, 60)
        deadline = time.monotonic() + QUIET_S
        while time.monotonic() < deadline:  # all is well: nothing pending, nothing firing
            assert _active(prom) == [] and scraped() == {"appliance": "1"}
            time.sleep(1.0)

        # A broker started beside it is found and scraped...
        broker = subprocess.Popen(
            [sys.executable, "-m", "appliance", "broker", "--port", "0", "--metrics-port",
             str(broker_metrics)], cwd=ROOT, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": str(ROOT)})
        found, _ = read_until_line(proc.stdout, "watch: found broker", 60)
        assert found == f"watch: found broker at 127.0.0.1:{broker_metrics}: scraping it " \
                        f"from now on"
        _until("the broker scraped up", lambda: scraped().get("broker") == "1", 60)
        # ...and stays scraped: its death is an alert.
        broker.terminate()
        broker.wait(timeout=60)
        _until("BrokerDown pending", lambda: [a for a in _active(prom)
                                              if a["labels"]["alertname"] == "BrokerDown"], 60)
    finally:
        if broker is not None and broker.poll() is None:
            broker.kill()
        proc.kill()  # kill -9: the watch runs none of its code
        proc.wait(timeout=30)
    _until("Prometheus and Alertmanager gone after the watch's kill -9",
           lambda: _refused(prom_port) and _refused(am_port), 60)
