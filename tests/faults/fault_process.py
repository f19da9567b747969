"""Real processes of the fault suite: ``appliance run`` (its JVM in its own process group,
so SIGKILL takes both, as a crash or the OOM killer would) and its config file."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from appliance.config import Config
from appliance.config import write_config as write_config_file
from appliance.process import process_group
from appliance.process.logwatch import last_event, log_events, wait_for_event

ROOT = Path(__file__).resolve().parents[2]
INTERVALS = {"continuous": "500 milliseconds", "realtime": "5 seconds",
             "microbatch": "200 milliseconds"}


def write_config(directory: Path, bootstrap: str, topics: dict[str, str], trigger: str,
                 checkpoint: Path, rules: Path, **query: object) -> Path:
    """``query``: more ``[query]`` settings (e.g. ``stall_timeout``)."""
    return write_config_file(Config.model_validate({
        "kafka": {"bootstrap_servers": bootstrap},
        "topics": topics,
        "query": {"trigger": trigger, "interval": INTERVALS[trigger],
                  "checkpoint_dir": str(checkpoint), **query},
        "rules": {"path": str(rules)},
        "spark": {"master": "local[2]"},
        "metrics": {"port": 0},
    }), directory / f"appliance-{trigger}.toml")


class ApplianceProcess:
    """One ``python -m appliance run --config FILE``; its log (stdout+stderr) in ``log``."""

    def __init__(self, config: Path, log: Path):
        env = {k: v for k, v in os.environ.items() if not k.startswith("APPLIANCE_")}
        env["PYTHONPATH"] = str(ROOT)
        self.log = log
        self.started = time.time()
        self._log_file = log.open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "appliance", "run", "--config", str(config)],
            stdout=self._log_file, stderr=subprocess.STDOUT, env=env, cwd=ROOT,
            start_new_session=True)

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def events(self) -> list[dict]:
        return log_events(self.log)

    def find(self, event: str) -> dict | None:
        return last_event(self.log, event)

    def wait_for(self, event: str, timeout: float = 900) -> dict:
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

    def terminate(self, timeout: float = 120) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.wait_exit(timeout)

    def cleanup(self) -> None:
        if self.proc.poll() is None:
            self.kill()
