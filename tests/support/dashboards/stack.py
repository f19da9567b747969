"""A real monitoring stack on loopback for the dashboard tests (and a demo render).

Every part is the real thing, each its own process: the broker (``appliance broker
--metrics-port``) and a ``kcat -G`` consumer group reading its alerts, a Spark standalone
master and worker (their PrometheusServlet, settings from ``appliance.tuning``),
``appliance run`` (its driver UI on, so the driver and executor servlets exist),
``loadgen run --metrics-port`` and Debian's ``prometheus`` with a config derived from the
committed ``dashboards/prometheus/prometheus.yml`` (same jobs and paths; only targets, a
1 s interval and the rule file's absolute path differ).
Every wait is bounded in time.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pyspark
import yaml

from appliance.broker import EmbeddedBroker
from appliance.process import process_group
from appliance.tuning import spark_metrics_conf
from dashboards import catalog

from support.ports import free_port

ROOT = Path(__file__).resolve().parents[3]
RULES = ROOT / "examples" / "rules.yml"
SPARK_HOME = Path(pyspark.__file__).parent



def wait_for(what: str, check, timeout: float, proc: subprocess.Popen | None = None,
              log: Path | None = None, period: float = 0.5, detail=None):
    """Poll ``check()`` until truthy (returned) or ``timeout`` s; fail with the log tail."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            break
        time.sleep(period)
    tail = log.read_text(errors="replace")[-3000:] if log and log.exists() else ""
    extra = detail() if detail is not None else ""
    raise AssertionError(f"timed out waiting for {what} {extra}\n{tail}")


def http_get(url: str, timeout: float = 10.0) -> str | None:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.read().decode("utf-8", "replace")
    except OSError:
        return None


class Stack:
    def __init__(self, tmp: Path, trigger: str = "continuous") -> None:
        self.tmp = tmp
        self.trigger = trigger
        self.procs: list[subprocess.Popen] = []
        self.broker: EmbeddedBroker | None = None
        self.topics = {"events": "events", "alerts": "alerts", "dead_letters": "events.dlq"}
        self.ports: dict[str, int] = {}
        self.targets: dict[str, str] = {}
        self.prometheus_url = ""
        self.env = dict(os.environ, SPARK_HOME=str(SPARK_HOME), SPARK_LOCAL_IP="127.0.0.1",
                        SPARK_LOG_DIR=str(tmp / "spark-logs"), SPARK_NO_DAEMONIZE="1",
                        SPARK_WORKER_DIR=str(tmp / "spark-work"))

    # -- processes ---------------------------------------------------------------------
    def _spawn(self, name: str, cmd: list[str], **kw) -> tuple[subprocess.Popen, Path]:
        log = self.tmp / f"{name}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, env=self.env,
                                    start_new_session=True, **kw)
        self.procs.append(proc)
        return proc, log

    def start_broker(self) -> None:
        self.broker = EmbeddedBroker(extra_args=["--metrics-port", "0"],
                                     topics={"events": 2, "alerts": 1, "events.dlq": 1},
                                     log_path=self.tmp / "broker.log", start_timeout=300)
        self.broker.start()
        assert self.broker.metrics_url, "broker printed no metrics url"
        self.targets["broker"] = urllib.parse.urlparse(self.broker.metrics_url).netloc

    def start_alert_consumer(self) -> None:
        """A downstream reader of the alerts, as a site runs one: ``kcat -G`` in a consumer
        group, committing as it goes (what the alert consumers' lag panel shows)."""
        assert self.broker is not None
        kcat = shutil.which("kcat")
        assert kcat, "kcat is not installed: run `make system-deps`"
        self._spawn("alert-consumer", [kcat, "-b", self.broker.bootstrap, "-G",
                                       "alert-forwarder", "-q", "-X",
                                       "auto.offset.reset=earliest", self.topics["alerts"]])

    def start_spark_cluster(self, timeout: float = 300) -> None:
        conf = self.tmp / "spark-defaults.conf"
        conf.write_text("".join(f"{k} {v}\n" for k, v in spark_metrics_conf().items()))
        spark_class = str(SPARK_HOME / "bin" / "spark-class")
        master, mlog = self._spawn("spark-master", [
            spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
            "--port", "0", "--webui-port", "0", "--properties-file", str(conf)])
        text = wait_for("spark master", lambda: _match(
            mlog, r"Starting Spark master at (spark://\S+)") and _match(
            mlog, r"MasterWebUI.*started at http://[^:]+:(\d+)") and mlog.read_text(),
            timeout, master, mlog)
        master_url = re.search(r"Starting Spark master at (spark://\S+)", text).group(1)
        ui = re.search(r"MasterWebUI.*started at http://[^:]+:(\d+)", text).group(1)
        self.targets["spark-master"] = self.targets["spark-applications"] = f"127.0.0.1:{ui}"
        worker, wlog = self._spawn("spark-worker", [
            spark_class, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
            "--port", "0", "--webui-port", "0", "--cores", "2", "--memory", "1g",
            "--properties-file", str(conf), master_url])
        wait_for("spark worker registration",
                 lambda: _match(wlog, r"Successfully registered with master"),
                 timeout, worker, wlog)
        wui = _match(wlog, r"WorkerWebUI.*started at http://[^:]+:(\d+)")
        self.targets["spark-worker"] = f"127.0.0.1:{wui}"

    def start_appliance(self, timeout: float = 900) -> None:
        assert self.broker is not None
        ui_port = free_port()
        config = self.tmp / "appliance.toml"
        config.write_text(
            f'[kafka]\nbootstrap_servers = "{self.broker.bootstrap}"\n'
            f'[query]\ntrigger = "{self.trigger}"\ninterval = "1 second"\n'
            f'checkpoint_dir = "{self.tmp / "checkpoint"}"\n'
            f'[rules]\npath = "{RULES}"\n'
            f'[spark]\nmaster = "local[2]"\n"spark.ui.enabled" = "true"\n'
            f'"spark.ui.port" = "{ui_port}"\n'
            f'[metrics]\nport = 0\n')
        proc, log = self._spawn("appliance", [sys.executable, "-m", "appliance", "run",
                                              "--config", str(config)], cwd=self.tmp)
        port = wait_for("appliance.ready", lambda: _match(log, r'"metrics_port": (\d+)'),
                        timeout, proc, log)
        self.targets["appliance"] = f"127.0.0.1:{port}"
        self.targets["spark-driver"] = self.targets["spark-executors"] = f"127.0.0.1:{ui_port}"
        wait_for("query.processing", lambda: _match(log, r'"event": "(query.processing)"'),
                 timeout, proc, log)
        self.appliance_log = log

    def plan_loadgen(self) -> None:
        """Pick loadgen's metrics port now, so Prometheus scrapes it from its first second."""
        self.targets["loadgen"] = f"127.0.0.1:{free_port()}"

    def start_loadgen(self, rate: float, seconds: float) -> None:
        assert self.broker is not None
        port = int(self.targets["loadgen"].rsplit(":", 1)[1])
        self.loadgen_report = self.tmp / "loadgen.json"
        self.loadgen, self.loadgen_log = self._spawn("loadgen", [
            sys.executable, "-m", "loadgen", "run", "--bootstrap", self.broker.bootstrap,
            "--rate", str(rate), "--duration", str(seconds), "--alert-ratio", "0.2",
            "--bad-ratio", "0.02", "--metrics-port", str(port), "--quiet", "--grace", "90",
            "--report", str(self.loadgen_report)])

    def start_prometheus(self, timeout: float = 120) -> None:
        committed = yaml.safe_load((catalog.PROMETHEUS_DIR / "prometheus.yml").read_text())
        # 5 s: Spark's driver UI servlets took 8-30 s to answer on a machine at load 46.
        committed["global"] = {"scrape_interval": "5s", "evaluation_interval": "5s",
                               "scrape_timeout": "5s"}
        committed["rule_files"] = [str(catalog.PROMETHEUS_DIR / "rules.yml")]
        for job in committed["scrape_configs"]:
            job["static_configs"] = [{"targets": [self.targets[job["job_name"]]]}]
        config = self.tmp / "prometheus.yml"
        config.write_text(yaml.safe_dump(committed))
        port = free_port()
        self.prometheus_url = f"http://127.0.0.1:{port}"
        proc, log = self._spawn("prometheus", [
            shutil.which("prometheus") or "prometheus", f"--config.file={config}",
            f"--storage.tsdb.path={self.tmp / 'tsdb'}", f"--web.listen-address=127.0.0.1:{port}",
            "--storage.tsdb.retention.time=1h", "--log.level=warn"])
        wait_for("prometheus ready", lambda: http_get(f"{self.prometheus_url}/-/ready", 2),
                 timeout, proc, log)

    # -- queries -------------------------------------------------------------------------
    def query_range(self, expr: str, start: float, end: float, step: float = 1.0) -> list:
        params = urllib.parse.urlencode({"query": expr, "start": start, "end": end,
                                         "step": step})
        body = http_get(f"{self.prometheus_url}/api/v1/query_range?{params}", 30)
        assert body is not None, f"prometheus did not answer {expr!r}"
        doc = json.loads(body)
        assert doc["status"] == "success", doc
        return doc["data"]["result"]

    def targets_up(self) -> dict[str, bool]:
        body = http_get(f"{self.prometheus_url}/api/v1/targets", 10) or "{}"
        active = json.loads(body).get("data", {}).get("activeTargets", [])
        return {t["labels"]["job"]: t["health"] == "up" for t in active}

    def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                process_group.signal_group(proc.pid, signal.SIGTERM)
        for proc in reversed(self.procs):
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process_group.kill(proc)
        if self.broker is not None:
            self.broker.stop()


def _match(path: Path, pattern: str) -> str | None:
    try:
        found = re.search(pattern, path.read_text(errors="replace"))
    except OSError:
        return None
    if not found:
        return None
    return found.group(1) if found.groups() else found.group(0)
