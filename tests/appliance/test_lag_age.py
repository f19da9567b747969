"""``appliance_consumer_lag_seconds``: the age of the next unread record, on a real broker.

The poller reads the same two facts as in production: Kafka (end offsets, and the record
at the committed offset) and a checkpoint directory in Spark's layout (``offsets/<id>``
before a batch, ``commits/<id>`` after it). Here the test writes that checkpoint, as a
query that commits and then stops committing would; ``tests/dashboards`` stops a real
query's executor for the same check end to end.
"""

from __future__ import annotations

import json
import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.structs import OffsetAndMetadata
from prometheus_client import CollectorRegistry, generate_latest

from appliance.config import TopicsConfig
from appliance.ha.kafka_offsets import PairOffsets
from appliance.observability.lag_age import NextRecordTimes, PartitionKey, lag_ages
from appliance.observability.metrics import ApplianceCollector, MetricsPoller


def _produce(bootstrap: str, topic: str, records: list[tuple[int, float]]) -> None:
    """(partition, timestamp in epoch ms) per record."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0)
    try:
        for partition, stamp in records:
            producer.send(topic, value=b'{"x": 1}', partition=partition,
                          timestamp_ms=int(stamp))
        producer.flush(timeout=30)
    finally:
        producer.close(timeout=10)


def _commit(checkpoint, batch: int, topic: str, offsets: dict[int, int]) -> None:
    """Spark's offset log entry and commit for ``batch``, as a query writes them."""
    (checkpoint / "offsets").mkdir(parents=True, exist_ok=True)
    (checkpoint / "commits").mkdir(parents=True, exist_ok=True)
    source = json.dumps({topic: {str(p): o for p, o in offsets.items()}})
    (checkpoint / "offsets" / str(batch)).write_text(
        f'v1\n{{"batchWatermarkMs":0,"batchTimestampMs":0}}\n{source}\n')
    (checkpoint / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}\n')


def test_timestamps_are_those_of_the_records_at_the_offsets(broker, new_topic):
    topic = new_topic(partitions=2)
    base = int(time.time()) * 1000 - 60_000
    _produce(broker.bootstrap, topic, [(0, base), (0, base + 1000), (0, base + 2000),
                                       (1, base + 5000), (1, base + 7000)])
    times = NextRecordTimes({"bootstrap_servers": broker.bootstrap})
    try:
        got = times.timestamps({PartitionKey(topic, 0): 1, PartitionKey(topic, 1): 0})
        assert got == {PartitionKey(topic, 0): base + 1000, PartitionKey(topic, 1): base + 5000}
        got = times.timestamps({PartitionKey(topic, 0): 2})  # moved on; p1 no longer wanted
        assert got == {PartitionKey(topic, 0): base + 2000}
    finally:
        times.close()


def test_lag_ages_are_zero_when_caught_up_and_the_age_of_the_next_record_otherwise(
        broker, new_topic):
    topic = new_topic(partitions=2)
    base = int(time.time()) * 1000 - 30_000
    _produce(broker.bootstrap, topic, [(0, base), (0, base + 10_000), (1, base + 20_000)])
    times = NextRecordTimes({"bootstrap_servers": broker.bootstrap})
    try:
        now = base / 1000 + 40
        ages = lag_ages({0: 2, 1: 1}, {0: 1, 1: 1}, topic, times, now=now)
        assert ages == {PartitionKey(topic, 0): 30.0, PartitionKey(topic, 1): 0.0}
        # Nothing committed yet: the first record waits.
        ages = lag_ages({0: 2, 1: 1}, {}, topic, times, now=now)
        assert ages == {PartitionKey(topic, 0): 40.0, PartitionKey(topic, 1): 20.0}
        # A producer clock ahead of ours is age 0, not negative.
        ages = lag_ages({0: 2, 1: 1}, {}, topic, times, now=base / 1000 - 5)
        assert ages == {PartitionKey(topic, 0): 0.0, PartitionKey(topic, 1): 0.0}
    finally:
        times.close()


def test_age_grows_one_second_per_second_while_commits_stop_and_returns_to_zero(
        broker, new_topic, tmp_path):
    """The poller's metric while the query stops committing, then commits everything."""
    topic = new_topic(partitions=2)
    checkpoint = tmp_path / "checkpoint"
    _produce(broker.bootstrap, topic, [(0, time.time() * 1000)] * 3 + [(1, time.time() * 1000)])
    _commit(checkpoint, 0, topic, {0: 3, 1: 1})  # everything read
    topics = TopicsConfig(events=topic, alerts=new_topic(1), dead_letters=new_topic(1))
    collector = ApplianceCollector("continuous", 1)
    poller = MetricsPoller(collector, {"bootstrap_servers": broker.bootstrap}, topics,
                           str(checkpoint), lambda: True)
    try:
        poller.poll_once()
        assert collector.snapshot.lag_seconds == {(topic, 0): 0.0, (topic, 1): 0.0}

        # The query stops committing; new events arrive on partition 0.
        written = time.time()
        _produce(broker.bootstrap, topic, [(0, written * 1000)] * 5)
        samples = []
        for _ in range(4):  # bounded: four polls over ~4.5 s
            time.sleep(1.5)
            poller.poll_once()
            samples.append((time.time(), collector.snapshot.lag_seconds[(topic, 0)]))
        for at, age in samples:
            assert abs(age - (at - written)) < 0.5, samples
        (t0, a0), (t1, a1) = samples[0], samples[-1]
        assert 0.8 < (a1 - a0) / (t1 - t0) < 1.2, samples
        assert collector.snapshot.lag_seconds[(topic, 1)] == 0.0
        assert collector.snapshot.lag == {(topic, 0): 5, (topic, 1): 0}

        # It resumes and commits everything: back to 0.
        _commit(checkpoint, 1, topic, {0: 8, 1: 1})
        poller.poll_once()
        assert collector.snapshot.lag_seconds == {(topic, 0): 0.0, (topic, 1): 0.0}
        registry = CollectorRegistry()
        registry.register(collector)
        text = generate_latest(registry).decode()
        assert f'appliance_consumer_lag_seconds{{partition="0",topic="{topic}"}} 0.0' in text
    finally:
        poller.stop()


def test_a_pairs_instances_count_their_lag_from_the_offsets_the_pair_committed(
        broker, new_topic, tmp_path):
    """[ha]: lag from the pair's group offsets in Kafka (what kafka-consumer-groups shows),
    not from this instance's checkpoint, which a waiting standby left long ago."""
    topic = new_topic(partitions=2)
    group = f"pair-{topic}"
    now_ms = time.time() * 1000
    _produce(broker.bootstrap, topic, [(0, now_ms)] * 6 + [(1, now_ms)] * 2)
    stale = tmp_path / "standby-checkpoint"
    _commit(stale, 0, topic, {0: 1, 1: 0})  # the standby's own, from when it last served
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=group,
                             enable_auto_commit=False)
    consumer.commit({TopicPartition(topic, 0): OffsetAndMetadata(4, "", -1),
                     TopicPartition(topic, 1): OffsetAndMetadata(2, "", -1)})
    consumer.close(autocommit=False)
    topics = TopicsConfig(events=topic, alerts=new_topic(1), dead_letters=new_topic(1))
    config = {"bootstrap_servers": broker.bootstrap}
    collector = ApplianceCollector("continuous", 1)
    poller = MetricsPoller(collector, config, topics, str(stale), lambda: False,
                           processed=PairOffsets(config, group, topic))
    try:
        poller.poll_once()
        assert collector.snapshot.lag == {(topic, 0): 2, (topic, 1): 0}
        assert collector.snapshot.committed == {(topic, 0): 4, (topic, 1): 2}
        assert collector.snapshot.lag_seconds[(topic, 1)] == 0.0
    finally:
        poller.stop()
