"""``appliance run`` as a real process: ready log, metrics, SIGKILL + restart without loss,
SIGTERM (once to the whole process group, JVM included) -> clean stop and exit 0. Every
trigger with its shipped defaults (warm-up, async progress tracking, sink commit), on the
session's embedded broker.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from appliance.config import Config
from appliance.config import write_config as write_config_file

from support.appliance_mix import MIX_RULES, check_outputs, make_mix
from support.appliance_process import ApplianceProcess
from support.kafka_io import consume, has_all, produce
from support.scrape import appliance_metrics
from support.short_intervals import SHORT_INTERVALS

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]


# Per trigger: its [query] interval. Real-time runs 5-second batches instead of its
# 5-minute default only so that a batch (and with it the lag metric) commits within the
# test's bounds; replay after the kill is the same mechanism at any batch length.
INTERVALS = {**SHORT_INTERVALS, "microbatch": None}  # micro-batch: the shipped default (0 s)


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


# The last stop's SIGTERM: to the appliance alone, or (once: it is the same shutdown) to
# its whole process group, JVM included, as ``timeout`` and systemd send it. `make test`
# runs the default trigger; the other two are fault variants (`make faults`), as the
# kill -9 suites in tests/faults are.
@pytest.mark.parametrize("trigger, group_stop", [
    ("continuous", True),
    pytest.param("realtime", False, marks=pytest.mark.faults_long),
    pytest.param("microbatch", False, marks=pytest.mark.faults_long)])
def test_sigkill_and_restart_loses_nothing_then_sigterm_stops_cleanly(
        trigger, group_stop, broker, new_topic, tmp_path):
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
            metrics = appliance_metrics(port)
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

        assert second.terminate(group=group_stop) == 0
        names = [e.get("event") for e in second.events()]
        assert "appliance.stopping" in names and names[-1] == "appliance.stopped"
        assert (tmp_path / "checkpoint" / "commits").is_dir()
    finally:
        first.cleanup()
        if second is not None:
            second.cleanup()

