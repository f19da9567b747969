"""Run the broker as a child process from Python (tests, demo, load generator).

A subprocess, not a thread: the broker must not share a GIL with the clients that
measure it. The child prints one ready line with its real port, which we parse.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from appliance.broker.cli import METRICS_PREFIX, READY_PREFIX
from appliance.broker.ready_line import read_until_line
from appliance.broker.wire.client import create_topics as _create_topics

_PROJECT_ROOT = str(Path(__file__).resolve().parents[2])


def _child_env() -> dict[str, str]:
    """Make ``python -m appliance`` importable even when not pip-installed."""
    env = dict(os.environ)
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if _PROJECT_ROOT not in paths:
        env["PYTHONPATH"] = os.pathsep.join([_PROJECT_ROOT, *paths])
    return env


class BrokerStartError(RuntimeError):
    pass


class EmbeddedBroker:
    """``with EmbeddedBroker() as b: b.bootstrap`` -> ``"127.0.0.1:PORT"``."""

    def __init__(self, port: int = 0, data_dir: str | os.PathLike | None = None,
                 host: str = "127.0.0.1", topics: dict[str, int] | None = None,
                 extra_args: list[str] | None = None,
                 log_path: str | os.PathLike | None = None, start_timeout: float = 30.0,
                 extra_env: dict[str, str] | None = None,
                 launcher: list[str] | None = None):
        self.host = host
        self.port = port
        self.data_dir = str(data_dir) if data_dir is not None else None
        self.extra_args = list(extra_args or [])
        if topics:  # created by the broker itself before its ready line
            self.extra_args += ["--topics", ",".join(f"{n}:{p}" for n, p in topics.items())]
        self.start_timeout = start_timeout
        self.extra_env = dict(extra_env or {})  # on top of ours, e.g. LD_PRELOAD in tests
        # argv put in front of the broker's own, e.g. ``["ip", "netns", "exec", NAME]`` to
        # run it in another network namespace (tests/faults/netns.py). It must exec the
        # broker, not fork it, so that signals sent to ``proc`` reach the broker itself.
        self.launcher = list(launcher or [])
        if log_path is None:
            fd, log_path = tempfile.mkstemp(prefix="embedded-broker-", suffix=".log")
            os.close(fd)
        self.log_path = Path(log_path)
        self.proc: subprocess.Popen | None = None
        self.bootstrap: str | None = None
        self.metrics_url: str | None = None  # with extra_args ["--metrics-port", "N"]

    # -- lifecycle ----------------------------------------------------------------------

    def start(self) -> EmbeddedBroker:
        if self.proc is not None and self.proc.poll() is None:
            return self
        cmd = [*self.launcher, sys.executable, "-m", "appliance", "broker",
               "--host", self.host, "--port", str(self.port)]
        if self.data_dir:
            cmd += ["--data-dir", self.data_dir]
        cmd += self.extra_args
        log = open(self.log_path, "ab")
        try:
            self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log,
                                         stdin=subprocess.DEVNULL,
                                         env={**_child_env(), **self.extra_env})
        finally:
            log.close()
        line = self._read_ready_line()
        self.bootstrap = line[len(READY_PREFIX):].strip()
        self.port = int(self.bootstrap.rpartition(":")[2])  # restart() reuses this port
        return self

    def _read_ready_line(self) -> str:
        assert self.proc is not None and self.proc.stdout is not None
        line, lines = read_until_line(self.proc.stdout, READY_PREFIX, self.start_timeout)
        for seen in lines:
            if seen.startswith(METRICS_PREFIX):
                self.metrics_url = seen[len(METRICS_PREFIX):].strip()
        if line is not None:
            return line
        self.kill()
        tail = self.log_path.read_text(errors="replace")[-2000:]
        raise BrokerStartError(f"broker did not become ready; log tail:\n{tail}")

    def stop(self, timeout: float = 15.0) -> int | None:
        """SIGTERM and wait; returns the exit code."""
        return self._end(signal.SIGTERM, timeout)

    def kill(self) -> int | None:
        """SIGKILL, as a crash would: nothing is flushed by the broker."""
        return self._end(signal.SIGKILL, 15.0)

    def _end(self, sig: int, timeout: float) -> int | None:
        proc, self.proc = self.proc, None
        if proc is None:
            return None
        if proc.poll() is None:
            proc.send_signal(sig)
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=timeout)
        if proc.stdout is not None:
            proc.stdout.close()
        return proc.returncode

    def restart(self) -> EmbeddedBroker:
        """Stop (if running) and start again on the same port and data directory."""
        self.stop()
        return self.start()

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- helpers ------------------------------------------------------------------------

    def create_topics(self, topics: dict[str, int], configs: dict | None = None) -> None:
        """Create topics (name -> partitions) over the Kafka protocol; existing ones are kept."""
        if self.bootstrap is None:
            raise RuntimeError("broker is not started")
        _create_topics(self.bootstrap, topics, configs)

    def is_running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None
