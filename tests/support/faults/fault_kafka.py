"""Kafka helpers of the fault suite: index alerts by ``alert_id`` for exact accounting
(lost, duplicates), wait for a topic to fill. Producing and reading a topic back whole:
``kafka_io`` (shared with the other suites)."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable

from kafka import KafkaConsumer, TopicPartition


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
