"""The embedded broker with librdkafka (confluent-kafka): produce, assign, offsets."""

from __future__ import annotations

import time

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

BASE_TS = 1_700_000_000_000


def _consume(bootstrap: str, topic: str, partition: int, offset: int, want: int,
             timeout_s: float = 20) -> list:
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                     "enable.auto.commit": False, "fetch.wait.max.ms": 100})
    try:
        c.assign([ck.TopicPartition(topic, partition, offset)])
        out = []
        deadline = time.monotonic() + timeout_s
        while len(out) < want and time.monotonic() < deadline:
            for m in c.consume(num_messages=1000, timeout=0.2):
                assert m.error() is None, m.error()
                out.append(m)
        return out
    finally:
        c.close()


def _watermarks(bootstrap: str, topic: str, partition: int) -> tuple[int, int]:
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                     "enable.auto.commit": False})
    try:
        return c.get_watermark_offsets(ck.TopicPartition(topic, partition), timeout=10)
    finally:
        c.close()


@pytest.mark.parametrize("compression", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_produce_and_consume_earliest_every_codec(broker, new_topic, compression):
    topic = new_topic(partitions=2)
    p = ck.Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True,
                     "compression.type": compression, "linger.ms": 5})
    n = 3000
    for i in range(n):
        p.produce(topic, key=b"k%d" % i, value=b"v%d" % i * 3, partition=i % 2,
                  timestamp=BASE_TS + i, headers=[("idx", str(i).encode()), ("dup", b"")])
        if i % 1000 == 999:
            p.poll(0)
    assert p.flush(30) == 0
    for part in range(2):
        assert _watermarks(broker.bootstrap, topic, part) == (0, n // 2)
        got = _consume(broker.bootstrap, topic, part, ck.OFFSET_BEGINNING, n // 2)
        assert [m.offset() for m in got] == list(range(n // 2))
        for m in got:
            i = m.offset() * 2 + part
            assert (m.key(), m.value()) == (b"k%d" % i, b"v%d" % i * 3)
            assert m.headers() == [("idx", str(i).encode()), ("dup", b"")]
            assert m.timestamp() == (ck.TIMESTAMP_CREATE_TIME, BASE_TS + i)


def test_high_watermark_after_every_produce(broker, new_topic):
    topic = new_topic(partitions=1)
    p = ck.Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 0})
    for i in range(1, 11):
        p.produce(topic, value=b"x%d" % i, partition=0)
        assert p.flush(10) == 0
        assert _watermarks(broker.bootstrap, topic, 0) == (0, i)


def test_consume_from_offset_latest_and_timestamp(broker, new_topic):
    topic = new_topic(partitions=1)
    p = ck.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(10):
        p.produce(topic, value=b"m%d" % i, partition=0, timestamp=BASE_TS + 10 * i)
    assert p.flush(10) == 0

    got = _consume(broker.bootstrap, topic, 0, 7, 3)
    assert [m.value() for m in got] == [b"m7", b"m8", b"m9"]

    c = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused",
                     "enable.auto.commit": False})
    try:
        found = c.offsets_for_times([ck.TopicPartition(topic, 0, BASE_TS + 41)], timeout=10)
        assert found[0].offset == 5
    finally:
        c.close()

    c = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused",
                     "enable.auto.commit": False, "fetch.wait.max.ms": 100})
    try:
        c.assign([ck.TopicPartition(topic, 0, ck.OFFSET_END)])
        # "latest" resolves asynchronously: keep producing until one arrives; whatever
        # arrives first must come after the 10 records that existed at assignment.
        late = []
        deadline = time.monotonic() + 20
        k = 0
        while not late and time.monotonic() < deadline:
            p.produce(topic, value=b"after%d" % k, partition=0)
            assert p.flush(10) == 0
            k += 1
            late = [m for m in c.consume(num_messages=100, timeout=0.3) if m.error() is None]
        assert late and late[0].offset() >= 10
        assert late[0].value() == b"after%d" % (late[0].offset() - 10)
    finally:
        c.close()


def test_group_id_assign_resumes_from_committed_offset(broker, new_topic):
    topic = new_topic(partitions=1)
    group = f"ck-{time.monotonic_ns()}"
    p = ck.Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(10):
        p.produce(topic, value=b"%d" % i, partition=0)
    assert p.flush(10) == 0
    conf = {"bootstrap.servers": broker.bootstrap, "group.id": group,
            "auto.offset.reset": "earliest", "enable.auto.commit": False}
    c = ck.Consumer(conf)
    try:
        c.assign([ck.TopicPartition(topic, 0)])  # no offset: the committed one, else reset
        got = []
        deadline = time.monotonic() + 20
        while len(got) < 10 and time.monotonic() < deadline:
            got += [m for m in c.consume(num_messages=10, timeout=0.2) if m.error() is None]
        assert [m.offset() for m in got] == list(range(10))
        c.commit(offsets=[ck.TopicPartition(topic, 0, 4)], asynchronous=False)
    finally:
        c.close()
    c = ck.Consumer(conf)
    try:
        c.assign([ck.TopicPartition(topic, 0)])
        got = []
        deadline = time.monotonic() + 20
        while len(got) < 6 and time.monotonic() < deadline:
            got += [m for m in c.consume(num_messages=10, timeout=0.2) if m.error() is None]
        assert [m.offset() for m in got] == list(range(4, 10))
    finally:
        c.close()


def test_admin_create_grow_delete(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    name = f"ck-admin-{time.monotonic_ns()}"
    admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=1)])[name].result(
        timeout=10)
    admin.create_partitions([NewPartitions(name, 3)])[name].result(timeout=10)
    meta = admin.list_topics(topic=name, timeout=10)
    assert len(meta.topics[name].partitions) == 3
    admin.delete_topics([name])[name].result(timeout=10)
    assert name not in admin.list_topics(timeout=10).topics
