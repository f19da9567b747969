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


def test_gzip_large_batches_and_watermark_after_each_produce(broker, new_topic):
    topic = new_topic(partitions=1)
    tp = TopicPartition(topic, 0)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks=1,
                             compression_type="gzip", batch_size=256 * 1024, linger_ms=20)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False)
    try:
        total = 0
        for burst in (1, 500, 3000):
            for i in range(burst):
                producer.send(topic, value=b"%08d" % (total + i) * 8, partition=0)
            producer.flush(timeout=30)
            total += burst
            assert consumer.end_offsets([tp])[tp] == total
    finally:
        producer.close()
        consumer.close()
    records = _consume(broker.bootstrap, tp, total)
    assert [r.offset for r in records] == list(range(total))
    assert all(r.value == b"%08d" % r.offset * 8 for r in records)


def test_given_offset_timestamp_and_latest(broker, new_topic):
    topic = new_topic(partitions=1)
    tp = TopicPartition(topic, 0)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
    try:
        for i in range(20):
            producer.send(topic, value=b"r%d" % i, partition=0, timestamp_ms=5_000 + 100 * i)
        producer.flush(timeout=20)

        assert [r.value for r in _consume(broker.bootstrap, tp, 5, seek=15)] == [
            b"r15", b"r16", b"r17", b"r18", b"r19"]

        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                                 fetch_max_wait_ms=100)
        try:
            found = consumer.offsets_for_times({tp: 5_000 + 100 * 7 + 1})[tp]
            assert (found.offset, found.timestamp) == (8, 5_800)
            assert consumer.beginning_offsets([tp])[tp] == 0
            consumer.assign([tp])
            consumer.seek_to_end(tp)
            assert consumer.position(tp) == 20  # latest, resolved now
            producer.send(topic, value=b"late", partition=0).get(timeout=20)
            late = []
            deadline = time.monotonic() + 20
            while not late and time.monotonic() < deadline:
                for records in consumer.poll(timeout_ms=200).values():
                    late.extend(records)
            assert [(r.offset, r.value) for r in late] == [(20, b"late")]
        finally:
            consumer.close()
    finally:
        producer.close()


def test_admin_client_creates_and_deletes(broker):
    from kafka.admin import KafkaAdminClient, NewPartitions, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    name = f"kp-admin-{time.monotonic_ns()}"
    try:
        admin.create_topics([NewTopic(name, num_partitions=2, replication_factor=1)])
        assert name in admin.list_topics()
        admin.create_partitions({name: NewPartitions(total_count=4)})
        (desc,) = admin.describe_topics([name])
        assert len(desc["partitions"]) == 4
        admin.delete_topics([name])
        assert name not in admin.list_topics()
    finally:
        admin.close()


def test_idempotent_producer_writes_exactly_n(broker, new_topic):
    topic = new_topic(partitions=1)
    tp = TopicPartition(topic, 0)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=True,
                             acks="all")
    try:
        futures = [producer.send(topic, value=b"%d" % i, partition=0) for i in range(1000)]
        producer.flush(timeout=30)
        assert sorted(f.get(timeout=10).offset for f in futures) == list(range(1000))
    finally:
        producer.close()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False)
    try:
        assert consumer.end_offsets([tp])[tp] == 1000
    finally:
        consumer.close()


def test_group_id_with_assign_commits_and_resumes(broker, new_topic):
    topic = new_topic(partitions=1)
    tp = TopicPartition(topic, 0)
    group = f"kp-{time.monotonic_ns()}"
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    try:
        for i in range(10):
            producer.send(topic, value=b"%d" % i, partition=0)
        producer.flush(timeout=20)
    finally:
        producer.close()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=group,
                             auto_offset_reset="earliest", enable_auto_commit=False)
    try:
        consumer.assign([tp])
        got = []
        deadline = time.monotonic() + 20
        while len(got) < 6 and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200, max_records=6 - len(got)).values():
                got.extend(records)
        assert [r.offset for r in got] == list(range(6))
        consumer.commit()
        assert consumer.committed(tp) == 6
    finally:
        consumer.close()
    again = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=group,
                          auto_offset_reset="earliest", enable_auto_commit=False)
    try:
        again.assign([tp])
        assert again.position(tp) == 6
    finally:
        again.close()
