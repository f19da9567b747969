"""Kafka helpers the suites share: produce a list of values round-robin over partitions,
and read a topic back whole (from the start, bounded in time) as ``(key, value)`` tuples."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable

from kafka import KafkaConsumer, KafkaProducer, TopicPartition


def produce(bootstrap: str, topic: str, values: Iterable[bytes | None],
            partitions: int = 2) -> None:
    """Value ``i`` to partition ``i % partitions``, acks=all, flushed before returning;
    records up to 4 MiB (hostile-input tests send large ones)."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0,
                             max_request_size=4 * 1024 * 1024)
    try:
        for i, value in enumerate(values):
            producer.send(topic, value=value, partition=i % partitions)
        producer.flush(timeout=60)
    finally:
        producer.close()


def consume(bootstrap: str, topic: str, want: int | Callable[[list[tuple]], bool],
            timeout: float) -> list[tuple]:
    """Read ``topic`` from the start until ``want`` (a count, or a predicate over the
    ``(key, value)`` list) is met or ``timeout`` passed, then poll once more so that extra
    (wrong) records would show up too."""
    done = want if callable(want) else (lambda records: len(records) >= want)
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


def has_all(field: str, expected) -> Callable[[list[tuple]], bool]:
    """``consume``'s ``want``: every expected ``field`` value is among the records' JSON
    values (duplicates allowed)."""
    return lambda records: set(expected) <= {json.loads(v)[field] for _k, v in records}


def rules_alerted(bootstrap: str, alerts: str, selected: Callable[[str], bool], count: int,
                  timeout: float) -> dict[str, list[str]]:
    """The rule ids each alert on ``alerts`` names, by event id, for the events
    ``selected`` picks; read until ``count`` such events have an alert (or ``timeout``)."""
    def by_event(records: list[tuple]) -> dict[str, list[str]]:
        out = {}
        for _k, v in records:
            alert = json.loads(v)
            if selected(alert["event_id"]):
                out[alert["event_id"]] = [r["id"] for r in alert["rules"]]
        return out
    return by_event(consume(bootstrap, alerts, lambda rs: len(by_event(rs)) >= count,
                            timeout))
