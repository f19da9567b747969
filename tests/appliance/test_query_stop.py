"""A real-time query stopped mid-batch (SIGTERM, ``Appliance.stop``) ends its batch first
(``appliance.process.query_stop``): the checkpoint commits the offsets read so far, and the
next run on it replays none of them. The batch (10 minutes) is longer than the test, so
only the stop can have committed it. Against the shared broker and the session's Spark."""

from __future__ import annotations

import json
import threading
import uuid
from collections import Counter

import pytest
from structlog.testing import capture_logs

from appliance.config import Config
from appliance.process.runner import Appliance
from appliance.query.checkpoint import committed_offsets
from appliance.trigger import MODES, StopAt

from support.appliance_mix import MIX_RULES
from support.kafka_io import consume, produce

pytestmark = pytest.mark.spark


def event(event_id: str) -> bytes:
    return json.dumps({"event_id": event_id, "ts": 1732200000123.5, "source": "host-1",
                       "metric": "cpu", "value": 85}).encode()


def test_only_realtime_ends_its_batch_before_it_stops():
    assert {m.name: m.stop_at for m in MODES.values()} == {
        "continuous": StopAt.ANYWHERE, "realtime": StopAt.BATCH_END,
        "microbatch": StopAt.ANYWHERE}


def test_a_stopped_realtime_batch_is_committed_and_the_next_run_replays_none_of_it(
        broker, new_topic, appliance_spark, tmp_path):
    events, alerts = new_topic(2), new_topic(1)
    rules = tmp_path / "rules.yml"
    rules.write_text(MIX_RULES)
    config = Config.model_validate({
        "kafka": {"bootstrap_servers": broker.bootstrap},
        "topics": {"events": events, "alerts": alerts, "dead_letters": new_topic(1)},
        "query": {"trigger": "realtime", "interval": "10 minutes",
                  "checkpoint_dir": str(tmp_path / "checkpoint"), "warmup": False},
        "rules": {"path": str(rules)}, "metrics": {"port": 0}})
    tag = uuid.uuid4().hex[:8]
    first_ids = [f"{tag}-a{i}" for i in range(8)]
    then_ids = [f"{tag}-b{i}" for i in range(8)]

    first = Appliance(config, spark=appliance_spark)
    try:
        first.start(threading.Event())
        produce(broker.bootstrap, events, [event(i) for i in first_ids])  # 4 a partition
        assert len(consume(broker.bootstrap, alerts, 8, timeout=60)) == 8
        assert committed_offsets(config.query.checkpoint_dir) == {}  # mid-batch
    finally:
        with capture_logs() as logged:
            first.stop()
    ended = [e for e in logged if e["event"] == "query.batch_ended"]
    assert len(ended) == 1 and ended[0]["seconds"] < 15, logged
    assert committed_offsets(config.query.checkpoint_dir) == {events: {0: 4, 1: 4}}

    second = Appliance(config, spark=appliance_spark)
    try:
        second.start(threading.Event())
        produce(broker.bootstrap, events, [event(i) for i in then_ids])
        records = consume(broker.bootstrap, alerts, 16, timeout=60)
    finally:
        second.stop()
    alerted = Counter(json.loads(v)["event_id"] for _k, v in records)
    # every event alerted once: the first run's batch was not read again
    assert alerted == Counter(first_ids + then_ids), alerted
