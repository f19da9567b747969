"""Kafka helpers of the fault suite: produce a list of records, read a topic back whole,
and index alerts by ``alert_id`` for exact accounting (lost, duplicates)."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Iterable

from kafka import KafkaConsumer, KafkaProducer, TopicPartition


def produce(bootstrap: str, topic: str, values: Iterable[bytes | None],
            partitions: int = 2) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0,
                             max_request_size=4 * 1024 * 1024)
    try:
        for i, value in enumerate(values):
            producer.send(topic, value=value, partition=i % partitions)
        producer.flush(timeout=60)
    finally:
        producer.close()


def read_topic(bootstrap: str, topic: str, done: Callable[[list[tuple]], bool],
               timeout: float) -> list[tuple]:
    """``(key, value)`` of every record of ``topic`` from the start, until ``done`` or
    ``timeout``, then one more poll so that extra records would show up too."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             fetch_max_bytes=16 * 1024 * 1024,
                             max_partition_fetch_bytes=8 * 1024 * 1024)
    try:
        parts = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic) or ()]
        consumer.assign(parts)
        consumer.seek_to_beginning(*parts)
        records: list[tuple] = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not done(records):
            for batch in consumer.poll(timeout_ms=200).values():
                records += [(r.key, r.value) for r in batch]
        for batch in consumer.poll(timeout_ms=1000).values():
            records += [(r.key, r.value) for r in batch]
        return records
    finally:
        consumer.close()


def alert_ids(records: list[tuple]) -> Counter:
    return Counter(json.loads(value)["alert_id"] for _key, value in records)


def has_ids(expected: set[str]) -> Callable[[list[tuple]], bool]:
    return lambda records: expected <= set(alert_ids(records))


def wait_for_records(bootstrap: str, topic: str, timeout: float = 120) -> None:
    """Until ``topic`` holds at least one record (the load really started)."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            parts = [TopicPartition(topic, p)
                     for p in consumer.partitions_for_topic(topic) or ()]
            if parts and sum(consumer.end_offsets(parts).values()) > 0:
                return
            time.sleep(0.2)
        raise AssertionError(f"no records in {topic} after {timeout} s")
    finally:
        consumer.close()
