"""A pair's standby plans its takeover's query while it waits (``QueryStart.prepare``),
and the query it starts once elected begins exactly at the pair's offsets in Kafka, seeded
into its fresh checkpoint (``seed_starting_offsets``), not at the planned
``startingOffsets``. Against the shared broker and the session's Spark."""

from __future__ import annotations

import json
import threading
import time
import uuid

import pytest
from kafka import KafkaConsumer, TopicPartition
from kafka.structs import OffsetAndMetadata
from structlog.testing import capture_logs

from appliance.config import Config
from appliance.ha.kafka_offsets import group_offsets
from appliance.process.query_start import exact_offsets
from appliance.process.runner import Appliance
from appliance.query.checkpoint import (
    INITIAL_OFFSETS,
    committed_offsets,
    processed_past,
    seed_starting_offsets,
)

from support.appliance_mix import MIX_RULES, one_alert_event
from support.kafka_io import consume, produce
from support.short_intervals import SHORT_INTERVALS

pytestmark = pytest.mark.spark



def test_exact_offsets_only_when_every_partition_has_one(tmp_path):
    assert exact_offsets('{"e": {"0": 4, "1": 0}}') == '{"e": {"0": 4, "1": 0}}'
    for start in (None, "latest", "earliest", '{"e": {"0": 4, "1": -2}}', "{}", "{oops"):
        assert exact_offsets(start) is None, start
    seeded = seed_starting_offsets(tmp_path / "cp", '{"e": {"0": 4}}')
    assert seeded == tmp_path / "cp" / "sources" / "0" / INITIAL_OFFSETS
    assert json.loads(seeded.read_text()) == {"e": {"0": 4}}
    (tmp_path / "cp" / "offsets").mkdir()
    (tmp_path / "cp" / "offsets" / "0").write_text("v1\n{}\n{}\n")
    assert seed_starting_offsets(tmp_path / "cp", '{"e": {"0": 9}}') is None  # it resumes
    assert json.loads(seeded.read_text()) == {"e": {"0": 4}}


def test_processed_past_needs_every_named_partition_at_or_beyond_its_offset():
    assert processed_past({0: 4, 1: 7}, {0: 4, 1: 6})
    assert processed_past({0: 4, 1: 7, 2: 0}, {})  # nothing to catch up with
    assert not processed_past({0: 4, 1: 5}, {0: 4, 1: 6})
    assert not processed_past({0: 9}, {0: 4, 1: 0})  # a partition not committed yet


#: Real-time runs a batch longer than the test: its checkpoint commits nothing meanwhile, so
#: its catch-up and the offsets it commits to the pair come from the connector's durable
#: marks (``ProcessedFrom.CHECKPOINT_AND_MARKS``), not from a batch's end.
INTERVALS = {**SHORT_INTERVALS, "realtime": "10 minutes"}


@pytest.mark.parametrize("trigger", ["continuous", "realtime"])
def test_an_elected_instance_starts_its_planned_query_at_the_pairs_offsets(
        trigger, broker, new_topic, appliance_spark, tmp_path):
    events, alerts = new_topic(2), new_topic(1)
    group = f"planned-{uuid.uuid4().hex[:8]}"
    rules = tmp_path / "rules.yml"
    rules.write_text(MIX_RULES)
    tag = uuid.uuid4().hex[:8]
    ids = [f"{tag}-{i}" for i in range(8)]
    produce(broker.bootstrap, events, [one_alert_event(i) for i in ids])  # 4 per partition
    # The partner processed the first two of each partition and committed that.
    committer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=group,
                              enable_auto_commit=False)
    try:
        committer.commit({TopicPartition(events, p): OffsetAndMetadata(2, "", -1)
                          for p in (0, 1)})
    finally:
        committer.close()
    config = Config.model_validate({
        "kafka": {"bootstrap_servers": broker.bootstrap},
        "topics": {"events": events, "alerts": alerts, "dead_letters": new_topic(1)},
        "query": {"trigger": trigger, "interval": INTERVALS[trigger],
                  "checkpoint_dir": str(tmp_path / "checkpoint"), "warmup": False,
                  "starting_offsets": "latest"},  # what the planned query says: not used
        "rules": {"path": str(rules)}, "metrics": {"port": 0},
        "ha": {"group": group, "session_timeout": "6 seconds"}})
    appliance = Appliance(config, spark=appliance_spark)
    try:
        with capture_logs() as logged:
            appliance.start(threading.Event())
        names = [e["event"] for e in logged]
        assert "ha.planned" in names and "ha.offsets_from_kafka" in names, names
        started = next(e for e in logged if e["event"] == "query.started")
        assert started["planned_ahead"] is True, started
        caught = [e for e in logged if e["event"] == "ha.caught_up"]
        # It said it serves only once its query had processed every event in the topic at
        # its election: their alerts are in Kafka before `ha.active`.
        assert [e["offsets"] for e in caught] == [{"0": 4, "1": 4}], caught
        assert names.index("ha.caught_up") < names.index("ha.active"), names
        records = consume(broker.bootstrap, alerts, 4, timeout=10)
        # The pair's offsets in Kafka follow (what a partner taking over starts from),
        # real-time's too, within its batch: its checkpoint has committed nothing.
        pair = {}
        deadline = time.monotonic() + 15
        while pair != {0: 4, 1: 4} and time.monotonic() < deadline:
            time.sleep(0.2)
            pair = group_offsets({"bootstrap_servers": broker.bootstrap}, group, events, 2)
        assert pair == {0: 4, 1: 4}, pair
        if trigger == "realtime":
            assert committed_offsets(appliance.probes.checkpoint_dir) == {}
    finally:
        appliance.stop()
    alerted = {json.loads(v)["event_id"] for _k, v in records}
    # offsets 2 and 3 of each partition: events 4..7 (event i went to partition i % 2)
    assert alerted == set(ids[4:]), sorted(alerted)
