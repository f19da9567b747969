"""``appliance run`` as a real process: ready log, metrics, SIGKILL + restart without loss,
SIGTERM -> clean stop and exit 0. Every trigger with its shipped defaults (warm-up, async
progress tracking, sink commit), on the session's embedded broker.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from appliance_mix import MIX_RULES, check_outputs, make_mix
from kafka_io import consume, produce

from appliance.config import Config
from appliance.config import write_config as write_config_file
from appliance.process import process_group
from appliance.process.logwatch import log_events, wait_for_event

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]


class ApplianceProcess:
    """One ``python -m appliance run`` in its own process group (its JVM included)."""

    def __init__(self, config: Path, log: Path):
        env = {k: v for k, v in os.environ.items() if not k.startswith("APPLIANCE_")}
        env["PYTHONPATH"] = str(ROOT)
        self.log = log
        self._log_file = log.open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "appliance", "run", "--config", str(config)],
            stdout=self._log_file, stderr=subprocess.STDOUT, env=env, cwd=ROOT,
            start_new_session=True)

    def events(self) -> list[dict]:
        return log_events(self.log)

    def wait_for(self, event: str, timeout: float = 600) -> dict:
        # 600 s: ``appliance.ready`` now also covers the warm-up and the query's tasks
        # starting, which the first consume below used to wait for; on a machine shared
        # with much other work a JVM start alone took minutes (a bound, not a target)
        return wait_for_event(self.log, event, self.proc, timeout)

    def kill(self) -> None:
        process_group.kill(self.proc)
        self._log_file.close()

    def terminate(self, timeout: float = 90, group: bool = False) -> int:
        """SIGTERM the appliance (``group``: and its JVM, as ``timeout`` or systemd do)."""
        if group:
            process_group.signal_group(self.proc.pid, signal.SIGTERM)
        else:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        finally:
            self._log_file.close()

    def cleanup(self) -> None:
        if self.proc.poll() is None:
            process_group.kill(self.proc)


def has_all(field: str, expected) -> callable:
    """Predicate: every expected ``field`` value is among the records (duplicates ok)."""
    return lambda records: set(expected) <= {json.loads(v)[field] for _k, v in records}


def scrape(port: int) -> dict[str, float]:
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback only
    text = direct.open(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    out = {}
    for line in text.splitlines():
        match = re.match(r"^(appliance_\w+(?:\{[^}]*\})?) (\S+)$", line)
        if match:
            out[match.group(1)] = float(match.group(2))
    return out


# Per trigger: its [query] interval. Real-time runs 5-second batches instead of its
# 5-minute default only so that a batch (and with it the lag metric) commits within the
# test's bounds; replay after the kill is the same mechanism at any batch length.
INTERVALS = {"continuous": "500 milliseconds", "realtime": "5 seconds",
             "microbatch": None}  # the shipped default (0 s)


def write_config(tmp_path: Path, broker, topics: dict[str, str],
                 trigger: str = "continuous") -> Path:
    (tmp_path / "rules.yml").write_text(MIX_RULES)
    query = {"trigger": trigger, "checkpoint_dir": "checkpoint"}
    if INTERVALS[trigger] is not None:
        query["interval"] = INTERVALS[trigger]
    return write_config_file(Config.model_validate({
        "kafka": {"bootstrap_servers": broker.bootstrap},
        "topics": topics,
        "query": query,
        "rules": {"path": "rules.yml"},
        "spark": {"master": "local[2]"},
        "metrics": {"port": 0},
    }), tmp_path / "appliance.toml")


@pytest.mark.parametrize("trigger", ["continuous", "realtime", "microbatch"])
def test_sigkill_and_restart_loses_nothing_then_sigterm_stops_cleanly(
        trigger, broker, new_topic, tmp_path):
    topics = {"events": new_topic(2), "alerts": new_topic(1), "dead_letters": new_topic(1)}
    config = write_config(tmp_path, broker, topics, trigger)
    before, during, after = make_mix("before"), make_mix("during"), make_mix("after")
    everything = make_mix("x")
    everything.alerts = {**before.alerts, **during.alerts, **after.alerts}
    everything.dead_letters = {**before.dead_letters, **during.dead_letters,
                               **after.dead_letters}
    first = ApplianceProcess(config, tmp_path / "first.log")
    second = None
    try:
        ready = first.wait_for("appliance.ready")
        assert ready["trigger"] == trigger and ready["rules"] == 3
        produce(broker.bootstrap, topics["events"], before.records)
        seen = consume(broker.bootstrap, topics["alerts"], len(before.alerts), 90)
        assert len(seen) >= len(before.alerts)
        produce(broker.bootstrap, topics["events"], during.records)
        first.kill()  # mid-stream: "during" may or may not have been processed

        second = ApplianceProcess(config, tmp_path / "second.log")
        ready = second.wait_for("appliance.ready")
        names = [e.get("event") for e in second.events()]
        # ready means running: the query processed (and the plan was warmed) before it
        assert names.index("warmup.done") < names.index("query.processing") \
            < names.index("appliance.ready")
        produce(broker.bootstrap, topics["events"], after.records)
        alerts = consume(broker.bootstrap, topics["alerts"],
                         has_all("alert_id", everything.alerts), 120)
        dead = consume(broker.bootstrap, topics["dead_letters"],
                       has_all("raw", everything.dead_letters), 60)
        check_outputs(everything, alerts, dead, exact=False)

        port = ready["metrics_port"]
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            metrics = scrape(port)
            lag = [v for k, v in metrics.items() if k.startswith("appliance_consumer_lag{")]
            if len(lag) == 2 and sum(lag) == 0 and metrics["appliance_events_read_total"] > 0:
                break
            time.sleep(0.5)
        assert metrics["appliance_query_up"] == 1.0
        assert metrics[f'appliance_trigger_info{{trigger="{trigger}"}}'] == 1.0
        assert metrics["appliance_rules"] == 3.0
        assert metrics["appliance_events_read_total"] >= len(after.records)
        assert metrics["appliance_alerts_written_total"] >= len(after.alerts)
        assert metrics["appliance_dead_letters_written_total"] >= len(after.dead_letters)
        assert sorted(lag) == [0.0, 0.0], metrics

        assert second.terminate() == 0
        names = [e.get("event") for e in second.events()]
        assert "appliance.stopping" in names and names[-1] == "appliance.stopped"
        assert (tmp_path / "checkpoint" / "commits").is_dir()
    finally:
        first.cleanup()
        if second is not None:
            second.cleanup()


def test_sigterm_to_the_whole_process_group_still_exits_0(broker, new_topic, tmp_path):
    """``timeout`` and systemd signal the JVM too; the appliance must still stop cleanly."""
    topics = {"events": new_topic(2), "alerts": new_topic(1), "dead_letters": new_topic(1)}
    proc = ApplianceProcess(write_config(tmp_path, broker, topics), tmp_path / "run.log")
    try:
        proc.wait_for("appliance.ready")
        assert proc.terminate(group=True) == 0
        assert proc.events()[-1]["event"] == "appliance.stopped"
    finally:
        proc.cleanup()
