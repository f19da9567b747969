"""Topic configs real clients send (issue 46, item 7): what Kafka accepts and this broker
can honour is accepted and honoured, with real admin clients creating the topics, and
what it cannot honour is refused with Kafka's error naming the missing feature.

``compression.type`` is honoured by rewriting batches in the topic's codec: records
produced uncompressed or in another codec come back, to every client, in the topic's."""

from __future__ import annotations

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient
from kafka.admin import NewTopic as KpNewTopic
from kafka.errors import InvalidConfigurationError

from appliance.broker.wire.client import WireClient
from appliance.broker.wire.records import ATTR_COMPRESSION_MASK, split_batches

from support.broker.java_programs import run_java
from support.wire_helpers import batch, fetch, produce, record_values

CODECS = {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
KAFKA_PYTHON_READS = ("uncompressed", "gzip")  # its other codecs need libraries not here
VALUES = [b"value-%03d" % i * 20 for i in range(50)]
# What client libraries' own admin tests create topics with, all honoured or inert here.
ACCEPTED = {"retention.ms": "3600000", "retention.bytes": "10485760",
            "segment.bytes": "1048576", "segment.ms": "600000", "segment.jitter.ms": "1000",
            "segment.index.bytes": "1048576", "index.interval.bytes": "4096",
            "max.message.bytes": "2097152", "min.insync.replicas": "1",
            "cleanup.policy": "delete", "compression.type": "lz4",
            "delete.retention.ms": "1000", "min.compaction.lag.ms": "0",
            "message.timestamp.type": "CreateTime"}


def _codecs_stored(bootstrap: str, topic: str) -> set[int]:
    with WireClient(bootstrap) as c:
        records = fetch(c, topic, 0, 0)["records"]
    return {h.attributes & ATTR_COMPRESSION_MASK for h in split_batches(bytes(records))}


def _fill(bootstrap: str, topic: str, codec: str) -> None:
    """The values from librdkafka in another codec than the topic's, then one batch
    uncompressed: both must be stored in the topic's codec."""
    producer = ck.Producer({"bootstrap.servers": bootstrap,
                            "compression.type": "gzip" if codec != "gzip" else "lz4",
                            "linger.ms": 5})
    for v in VALUES:
        producer.produce(topic, v, partition=0)
    assert producer.flush(30) == 0
    with WireClient(bootstrap) as c:
        produce(c, topic, 0, batch([b"raw"]))


@pytest.mark.parametrize("codec", list(CODECS))
def test_compression_type_rewrites_batches_in_the_topics_codec(broker, new_topic, codec):
    topic = new_topic(partitions=1, configs={"compression.type": codec})
    _fill(broker.bootstrap, topic, codec)
    values = VALUES
    assert _codecs_stored(broker.bootstrap, topic) == {CODECS[codec]}
    if codec in KAFKA_PYTHON_READS:
        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap,
                                 consumer_timeout_ms=10000, auto_offset_reset="earliest")
        consumer.assign([TopicPartition(topic, 0)])
        got = [m.value for m in consumer]
        consumer.close()
        assert got == values + [b"raw"]
    ckc = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"g-{topic}",
                       "auto.offset.reset": "earliest", "enable.auto.commit": False})
    ckc.assign([ck.TopicPartition(topic, 0, 0)])
    seen: list[bytes] = []
    for _ in range(60):
        if len(seen) == len(values) + 1:
            break
        m = ckc.poll(1.0)
        if m is not None and m.error() is None:
            seen.append(m.value())
    ckc.close()
    assert seen == values + [b"raw"]


@pytest.mark.java
def test_java_reads_every_topic_codec(broker, new_topic, java_checks):
    topics = {}
    for codec in CODECS:
        topics[codec] = new_topic(partitions=1, configs={"compression.type": codec})
        _fill(broker.bootstrap, topics[codec], codec)
    out = run_java(java_checks, "ConsumeCheck", broker.bootstrap, *topics.values(),
                   timeout=180)
    for topic in topics.values():
        assert out[topic] == f"{len(VALUES) + 1},{VALUES[0].decode()},raw"


def test_a_topic_keeps_the_producers_codec_by_default(broker, new_topic):
    topic = new_topic(partitions=1)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, compression_type="gzip")
    producer.send(topic, b"x" * 100, partition=0).get(timeout=30)
    producer.close()
    with WireClient(broker.bootstrap) as c:
        produce(c, topic, 0, batch([b"plain"]))
        assert record_values(fetch(c, topic, 0, 0)["records"]) == [b"x" * 100, b"plain"]
    assert _codecs_stored(broker.bootstrap, topic) == {0, 1}


def test_admin_clients_create_topics_with_the_configs_they_send(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    futures = admin.create_topics([NewTopic("ck-configs", 1, 1, config=ACCEPTED)])
    futures["ck-configs"].result(timeout=30)
    kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        kp.create_topics([KpNewTopic("kp-configs", 1, 1, topic_configs=ACCEPTED)])
        kp.create_topics([KpNewTopic("kp-compact", 1, 1,
                                     topic_configs={"cleanup.policy": "compact"})])
        with pytest.raises(InvalidConfigurationError, match="String must be one of"):
            kp.create_topics([KpNewTopic("kp-shrink", 1, 1,
                                         topic_configs={"cleanup.policy": "shrink"})])
    finally:
        kp.close()
    created = admin.create_topics([NewTopic("ck-compact", 1, 1,
                                            config={"cleanup.policy": "compact,delete"})])
    created["ck-compact"].result(timeout=30)
    for bad, why in (({"min.insync.replicas": "2"}, "single-broker"),
                     ({"compression.type": "brotli"}, "String must be one of")):
        refused = admin.create_topics([NewTopic("ck-bad", 1, 1, config=bad)])
        with pytest.raises(ck.KafkaException, match=why):
            refused["ck-bad"].result(timeout=30)
