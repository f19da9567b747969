"""``appliance run`` as a real process for the suites that start one (appliance, faults,
cluster): in its own process group, so a SIGKILL takes its Spark JVM too, as a crash or the
OOM killer would; its log (stdout and stderr, JSON lines) in a file the test reads."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from appliance.process import process_group
from appliance.process.logwatch import last_event, log_events, wait_for_event

from support.child_env import ROOT, child_env


class ApplianceProcess:
    """One ``python -m appliance run --config FILE``; its log in ``log``."""

    def __init__(self, config: Path, log: Path):
        self.log = log
        self.started = time.time()
        self._log_file = log.open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "appliance", "run", "--config", str(config)],
            stdout=self._log_file, stderr=subprocess.STDOUT, env=child_env(), cwd=ROOT,
            start_new_session=True)

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def events(self) -> list[dict]:
        return log_events(self.log)

    def find(self, event: str) -> dict | None:
        return last_event(self.log, event)

    def wait_for(self, event: str, timeout: float = 900) -> dict:
        # A bound, not a target: ``appliance.ready`` covers the warm-up and the query's tasks
        # starting, and on a machine shared with much other work a JVM start alone has
        # taken minutes.
        return wait_for_event(self.log, event, self.proc, timeout)

    def wait_exit(self, timeout: float = 600) -> int:
        try:
            return self.proc.wait(timeout=timeout)
        finally:
            self._log_file.close()

    def kill(self) -> None:
        """SIGKILL to the whole group: the Python process and Spark's JVM."""
        process_group.kill(self.proc)
        self._log_file.close()

    def terminate(self, timeout: float = 120, group: bool = False) -> int:
        """SIGTERM the appliance (``group``: and its JVM, as ``timeout`` or systemd do)."""
        if group:
            process_group.signal_group(self.proc.pid, signal.SIGTERM)
        else:
            self.proc.send_signal(signal.SIGTERM)
        return self.wait_exit(timeout)

    def cleanup(self) -> None:
        if self.proc.poll() is None:
            self.kill()
