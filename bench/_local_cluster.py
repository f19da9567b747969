"""A throwaway Spark standalone cluster on loopback: one master and N workers.

Each daemon is its own process, started with the installed pyspark's ``bin/spark-class``
exactly as a deployed cluster's daemons are (``...deploy.master.Master`` /
``...deploy.worker.Worker``), so the appliance can be tried, tested and benchmarked as a
real cluster driver on one machine, with its executors in JVMs of their own.

Every daemon gets its own process group: the executors a worker launches are its children
and share that group, so stopping the cluster (SIGTERM, then SIGKILL after a bounded wait)
leaves nothing behind. Ports are picked by the daemons themselves (``--port 0``) and read
back from their logs, so clusters of parallel test runs never collide.

It lives with the benchmarks, not in the product: only ``tests/cluster`` and
``bench.cluster_latency`` start one (bench is the top layer, tests may import any).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pyspark

from appliance.process import process_group

SPARK_HOME = Path(pyspark.__file__).resolve().parent
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
EXECUTOR_CLASS = "org.apache.spark.executor.CoarseGrainedExecutorBackend"

# The daemons' own settings: no REST submission server (it would take a fixed port, 6066,
# and accept jobs from anyone who can reach it).
DAEMON_CONF = {"spark.master.rest.enabled": "false"}

_MASTER_URL = re.compile(r"Starting Spark master at (spark://\S+)")
_MASTER_UI = re.compile(r"Successfully started service 'MasterUI' on port (\d+)")


class ClusterError(RuntimeError):
    """A daemon did not start (the message carries its log's tail)."""


@dataclass
class Daemon:
    name: str
    proc: subprocess.Popen
    log: Path

    def tail(self, chars: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-chars:]


@dataclass(frozen=True)
class Executor:
    """An executor JVM a worker of this cluster launched."""

    pid: int
    app_id: str
    executor_id: str
    worker: str


class LocalCluster:
    """``with LocalCluster(workers=2) as cluster: cluster.master_url`` -> ``spark://...``."""

    def __init__(self, workers: int = 2, cores_per_worker: int = 2,
                 worker_memory: str = "1g", daemon_memory: str = "256m",
                 base_dir: str | os.PathLike | None = None, start_timeout: float = 240.0):
        self.workers = workers
        self.cores_per_worker = cores_per_worker
        self.worker_memory = worker_memory
        self.daemon_memory = daemon_memory
        self.start_timeout = start_timeout
        self._tmp = None
        if base_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="spark-cluster-")
            base_dir = self._tmp.name
        self.base_dir = Path(base_dir)
        self.master: Daemon | None = None
        self.worker_daemons: list[Daemon] = []
        self.master_url: str | None = None
        self.ui_url: str | None = None

    # -- lifecycle ----------------------------------------------------------------------
    def start(self) -> LocalCluster:
        conf_dir = self.base_dir / "conf"
        conf_dir.mkdir(parents=True, exist_ok=True)
        props = conf_dir / "spark-defaults.conf"
        props.write_text("".join(f"{k} {v}\n" for k, v in DAEMON_CONF.items()))
        deadline = time.monotonic() + self.start_timeout
        try:
            self.master = self._spawn("master", [MASTER_CLASS, "--host", "127.0.0.1",
                                                 "--port", "0", "--webui-port", "0",
                                                 "--properties-file", str(props)])
            self.master_url = self._await_log(self.master, _MASTER_URL, deadline)
            self.ui_url = f"http://127.0.0.1:{self._await_log(self.master, _MASTER_UI, deadline)}"
            for i in range(self.workers):
                work_dir = self.base_dir / f"worker-{i}"
                work_dir.mkdir(exist_ok=True)
                self.worker_daemons.append(self._spawn(f"worker-{i}", [
                    WORKER_CLASS, "--host", "127.0.0.1", "--port", "0", "--webui-port", "0",
                    "--cores", str(self.cores_per_worker), "--memory", self.worker_memory,
                    "--work-dir", str(work_dir), "--properties-file", str(props),
                    self.master_url]))
            self._await_workers(deadline)
        except BaseException:
            self.stop()
            raise
        return self

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM every daemon's process group (executors included), SIGKILL stragglers."""
        daemons = [*self.worker_daemons, *([self.master] if self.master else [])]
        for daemon in daemons:
            process_group.signal_group(daemon.proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for daemon in daemons:
            try:
                daemon.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for daemon in daemons:  # whatever is left in a group (an executor, a hung JVM)
            process_group.signal_group(daemon.proc.pid, signal.SIGKILL)
            try:
                daemon.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        self.worker_daemons, self.master = [], None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    # -- what is running ----------------------------------------------------------------
    def status(self) -> dict:
        """The master's JSON status: workers (state, cores), active applications."""
        direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with direct.open(f"{self.ui_url}/json/", timeout=10) as response:
            return json.loads(response.read())

    def executors(self, app_id: str | None = None) -> list[Executor]:
        """Executor JVMs running under this cluster's workers (of ``app_id`` if given)."""
        workers = {d.proc.pid: d.name for d in self.worker_daemons}
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                if ppid not in workers:
                    continue
                argv = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
            except (OSError, IndexError, ValueError):
                continue  # gone meanwhile
            if EXECUTOR_CLASS not in argv:
                continue
            args = dict(zip(argv, argv[1:], strict=False))
            executor = Executor(int(entry.name), args.get("--app-id", ""),
                                args.get("--executor-id", ""), workers[ppid])
            if app_id is None or executor.app_id == app_id:
                found.append(executor)
        return sorted(found, key=lambda e: e.pid)

    # -- internals ----------------------------------------------------------------------
    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("SPARK_", "PYSPARK_"))}
        env.update(SPARK_HOME=str(SPARK_HOME), SPARK_CONF_DIR=str(self.base_dir / "conf"),
                   SPARK_DAEMON_MEMORY=self.daemon_memory, SPARK_LOCAL_IP="127.0.0.1",
                   SPARK_NO_DAEMONIZE="1")
        return env

    def _spawn(self, name: str, args: list[str]) -> Daemon:
        log = self.base_dir / f"{name}.log"
        with log.open("ab") as out:
            proc = subprocess.Popen([str(SPARK_HOME / "bin" / "spark-class"), *args],
                                    stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, env=self._env(),
                                    cwd=self.base_dir, start_new_session=True)
        return Daemon(name, proc, log)

    @staticmethod
    def _await_log(daemon: Daemon, pattern: re.Pattern, deadline: float) -> str:
        while time.monotonic() < deadline:
            match = pattern.search(daemon.log.read_text(errors="replace"))
            if match:
                return match.group(1)
            if daemon.proc.poll() is not None:
                break
            time.sleep(0.3)
        raise ClusterError(f"spark {daemon.name} did not start (rc={daemon.proc.poll()}):\n"
                           f"{daemon.tail()}")

    def _await_workers(self, deadline: float) -> None:
        alive = 0
        while time.monotonic() < deadline:
            dead = [d for d in self.worker_daemons if d.proc.poll() is not None]
            if dead:
                raise ClusterError(f"spark {dead[0].name} exited:\n{dead[0].tail()}")
            try:
                alive = sum(w.get("state") == "ALIVE" for w in self.status()["workers"])
            except OSError:
                alive = 0
            if alive >= self.workers:
                return
            time.sleep(0.5)
        raise ClusterError(f"{alive} of {self.workers} workers registered with "
                           f"{self.master_url} in time:\n{self.worker_daemons[-1].tail()}")
