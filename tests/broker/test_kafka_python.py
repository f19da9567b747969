"""The embedded broker with kafka-python: produce, consume with assign, list offsets."""

from __future__ import annotations

import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition


def _consume(bootstrap: str, tp: TopicPartition, want: int, seek=None, timeout_s: float = 20):
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             fetch_max_wait_ms=100)
    try:
        consumer.assign([tp])
        if seek is None:
            consumer.seek_to_beginning(tp)
        else:
            consumer.seek(tp, seek)
        out = []
        deadline = time.monotonic() + timeout_s
        while len(out) < want and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                out.extend(records)
        return out
    finally:
        consumer.close()


def test_produce_consume_earliest_with_headers(broker, new_topic):
    topic = new_topic(partitions=2)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
    try:
        for i in range(50):
            producer.send(topic, key=b"k%d" % i, value=b"v%d" % i, partition=i % 2,
                          headers=[("idx", str(i).encode())], timestamp_ms=1_700_000_000_000 + i)
        producer.flush(timeout=20)
    finally:
        producer.close()
    for p in range(2):
        records = _consume(broker.bootstrap, TopicPartition(topic, p), 25)
        assert [r.offset for r in records] == list(range(25))
        for r in records:
            i = r.offset * 2 + p
            assert (r.key, r.value) == (b"k%d" % i, b"v%d" % i)
            assert r.headers == [("idx", str(i).encode())]
            assert r.timestamp == 1_700_000_000_000 + i
