"""An active/standby pair (``[ha]``): two real ``appliance run`` processes whose configs
differ only in ``[metrics] port``, one embedded broker, open-loop load with exact
accounting by ``alert_id``.

kill -9 of the active: the warm standby takes over within the session timeout plus its
query's start, and every alerting event still gets its alert. Then the killed instance
comes back as the standby (its checkpoint now stale: it must start from the offsets the
pair committed to Kafka, not from there), and SIGTERM of the active hands over at once,
without waiting out a session timeout.
"""

from __future__ import annotations

import time
import uuid
from datetime import datetime
from pathlib import Path

import pytest
from appliance_process import ApplianceProcess
from fault_accounting import account_alerts
from fault_kafka import wait_for_records
from fault_process import INTERVALS
from kafka import KafkaConsumer, TopicPartition
from loadrun import LoadThread, rules_yaml
from ports import free_port

from appliance.config import Config, write_config

pytestmark = [pytest.mark.spark, pytest.mark.timeout(1200)]

RATE = 150.0
SESSION_S = 6.0
TRIGGER = "continuous"


def pair_config(tmp_path: Path, name: str, bootstrap: str, topics: dict[str, str],
                group: str, rules: Path) -> Path:
    """One instance's config: the pair's configs differ only in the metrics port."""
    return write_config(Config.model_validate({
        "kafka": {"bootstrap_servers": bootstrap},
        "topics": topics,
        "query": {"trigger": TRIGGER, "interval": INTERVALS[TRIGGER],
                  "checkpoint_dir": str(tmp_path / "checkpoints")},
        "rules": {"path": str(rules)},
        "spark": {"master": "local[2]", "spark.ui.enabled": "false"},
        "metrics": {"port": free_port()},
        "ha": {"group": group, "session_timeout": f"{SESSION_S:g} seconds"},
    }), tmp_path / f"appliance-{name}.toml")


def group_committed(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group,
                             enable_auto_commit=False)
    try:
        out = {p: consumer.committed(TopicPartition(topic, p)) for p in range(2)}
        return {p: o for p, o in out.items() if o is not None}
    finally:
        consumer.close(autocommit=False)


def test_pair_kill_9_then_sigterm_hand_over(broker, fault_topics, tmp_path):
    topics = fault_topics()
    group = f"pair-{uuid.uuid4().hex[:8]}"
    rules = tmp_path / "rules.yml"
    rules.write_text(rules_yaml())
    configs = {n: pair_config(tmp_path, n, broker.bootstrap, topics, group, rules)
               for n in ("a", "b")}
    procs: list[ApplianceProcess] = []

    def start(name: str, run: int) -> ApplianceProcess:
        procs.append(ApplianceProcess(configs[name], tmp_path / f"{name}-{run}.log"))
        return procs[-1]

    try:
        a = start("a", 0)
        a.wait_for("appliance.ready")
        assert a.find("ha.active") is not None
        b = start("b", 0)
        b.wait_for("ha.standby")
        assert b.find("appliance.ready") is None  # warm, waiting: no query

        # kill -9 of the active under load: the standby takes over, nothing is lost.
        load = LoadThread(broker.bootstrap, topics, RATE, duration=25.0).start()
        wait_for_records(broker.bootstrap, topics["events"])
        time.sleep(8.0)  # epochs committed, their offsets in Kafka
        assert group_committed(broker.bootstrap, group, topics["events"])
        a.kill()
        killed = time.time()
        b.wait_for("appliance.ready")
        took = time.time() - killed
        active = b.find("ha.active")
        assert active is not None and active["starting_offsets"], active
        report = load.join(timeout=600)
        assert report.send_failed == 0
        result = account_alerts(broker.bootstrap, topics["alerts"], load.factory,
                                report.sent, {"kill -9": killed})
        print(result.line(f"pair kill -9 at {RATE:g}/s") + f"; standby serving after {took:.1f} s")
        assert result.lost == [], result.lost[:20]

        # The killed instance returns as the standby; SIGTERM of the active hands over.
        a2 = start("a", 1)
        a2.wait_for("ha.standby")
        load = LoadThread(broker.bootstrap, topics, RATE, duration=15.0).start()
        time.sleep(5.0)
        stopped = time.time()
        assert b.terminate() == 0
        elected = a2.wait_for("ha.elected")
        handover = datetime.fromisoformat(elected["timestamp"]).timestamp() - stopped
        assert handover < SESSION_S, handover  # it left the group: no session timeout
        a2.wait_for("appliance.ready")
        moved = a2.find("ha.offsets_from_kafka")
        assert moved is not None and moved["stale_checkpoint"], moved  # not its own state
        report = load.join(timeout=600)
        assert report.send_failed == 0
        result = account_alerts(broker.bootstrap, topics["alerts"], load.factory,
                                report.sent, {"SIGTERM": stopped})
        print(result.line(f"pair SIGTERM at {RATE:g}/s") +
              f"; standby elected {handover:.1f} s after the SIGTERM")
        assert result.lost == [], result.lost[:20]
        assert b.text().count('"ha.left"') == 1
        assert a2.terminate() == 0
    finally:
        for proc in procs:
            proc.cleanup()
