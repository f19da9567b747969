"""The Kafka a run uses, against real brokers: an embedded one it starts, creates its
topics on and stops; an operator's, where it only checks (no JVM)."""

from __future__ import annotations

import uuid

import pytest

from appliance.config import Config
from appliance.process.kafka_side import WARMUP_PARTITIONS, KafkaSide
from appliance.process.run_settings import RunSettings
from appliance.topics import TopicError


def _topics() -> dict[str, str]:
    stem = uuid.uuid4().hex[:8]
    return {"events": f"ev-{stem}", "alerts": f"al-{stem}", "dead_letters": f"dl-{stem}",
            "warmup": f"wu-{stem}"}


def test_an_embedded_broker_gets_the_topics_and_stops_with_the_run():
    config = Config.model_validate({"kafka": {"embedded_port": 0}, "topics": _topics()})
    kafka = KafkaSide.start(config)
    try:
        assert kafka.broker is not None and kafka.broker_pids() == [kafka.broker.proc.pid]
        client = RunSettings.for_broker(config, kafka.bootstrap).client()
        counts = kafka.ensure_topics(client)
        assert set(counts) == {config.topics.events, config.topics.alerts,
                               config.topics.dead_letters}
        assert kafka.events_partitions == counts[config.topics.events] > 0
        assert kafka.warmup_topic(client) == config.topics.warmup
        proc = kafka.broker.proc
    finally:
        kafka.close()
    assert kafka.broker is None and kafka.broker_pids() == []
    assert proc.poll() is not None  # the broker's process ended
    kafka.close()  # once only


def test_an_operators_kafka_is_checked_never_written(broker):
    config = Config.model_validate({"kafka": {"bootstrap_servers": broker.bootstrap},
                                    "topics": _topics()})
    kafka = KafkaSide.start(config)
    assert kafka.broker is None and kafka.bootstrap == broker.bootstrap
    client = RunSettings.for_broker(config, kafka.bootstrap).client()
    with pytest.raises(TopicError, match="topics missing on the Kafka cluster"):
        kafka.ensure_topics(client)
    assert kafka.warmup_topic(client) is None  # not there: a plan-only warm-up
    broker.create_topics({config.topics.warmup: WARMUP_PARTITIONS})
    assert kafka.warmup_topic(client) == config.topics.warmup
    kafka.close()  # nothing of its own to stop


def test_no_warm_up_topic_when_the_warm_up_is_off(broker):
    config = Config.model_validate({"kafka": {"bootstrap_servers": broker.bootstrap},
                                    "topics": _topics(), "query": {"warmup": False}})
    broker.create_topics({config.topics.warmup: WARMUP_PARTITIONS})
    kafka = KafkaSide.start(config)
    assert kafka.warmup_topic(RunSettings.for_broker(config, kafka.bootstrap).client()) is None
