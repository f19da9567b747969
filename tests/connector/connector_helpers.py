"""Kafka I/O for the connector tests: produce known records, read a topic back, wait for a
query. Real clients (kafka-python) against the real embedded broker; every wait is bounded."""

from __future__ import annotations

import time
from dataclasses import dataclass

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

DEADLINE_S = 90.0


@dataclass(frozen=True)
class Rec:
    key: bytes | None
    value: bytes
    headers: tuple


def produce(bootstrap: str, topic: str, tag: str, count: int, partitions: int = 2,
            start: int = 0) -> list[Rec]:
    """Sends ``count`` records round-robin over ``partitions`` with keys and headers."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    sent = []
    try:
        for i in range(start, start + count):
            rec = Rec(key=f"{tag}-k{i}".encode(), value=f"{tag}-v{i}".encode(),
                      headers=(("h1", f"{tag}-{i}".encode()), ("h2", b"\x00\xff")))
            producer.send(topic, key=rec.key, value=rec.value, headers=list(rec.headers),
                          partition=i % partitions)
            sent.append(rec)
        producer.flush(timeout=30)
    finally:
        producer.close(timeout=10)
    return sent


def read_topic(bootstrap: str, topic: str, partitions: int = 2) -> list[Rec]:
    """Everything currently in ``topic`` (reads up to the end offsets seen at call time)."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                             enable_auto_commit=False, consumer_timeout_ms=1000)
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        ends = consumer.end_offsets(tps)
        out: list[Rec] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if all(consumer.position(tp) >= ends[tp] for tp in tps):
                break
            for recs in consumer.poll(timeout_ms=200).values():
                out += [Rec(r.key, r.value, tuple((k, v) for k, v in r.headers)) for r in recs]
        return out
    finally:
        consumer.close()


def wait_for_records(bootstrap: str, topic: str, expected: list[Rec], query=None,
                     partitions: int = 2, deadline_s: float = DEADLINE_S) -> list[Rec]:
    """Polls ``topic`` until every expected record is there (duplicates allowed)."""
    want = set(expected)
    deadline = time.monotonic() + deadline_s
    got: list[Rec] = []
    while time.monotonic() < deadline:
        got = read_topic(bootstrap, topic, partitions)
        if want <= set(got):
            return got
        if query is not None and query.exception() is not None:
            raise AssertionError(f"query failed: {query.exception()}")
        time.sleep(0.3)
    missing = want - set(got)
    raise AssertionError(f"{len(missing)} of {len(want)} records missing from {topic}, "
                         f"e.g. {sorted(missing, key=lambda r: r.value)[:3]}")


def wait_until(predicate, what: str, deadline_s: float = DEADLINE_S, query=None) -> None:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if predicate():
            return
        if query is not None and query.exception() is not None:
            raise AssertionError(f"query failed while waiting for {what}: {query.exception()}")
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def rows_as_recs(rows) -> list[Rec]:
    """Rows of the read schema (with includeHeaders=true) as comparable records."""
    return [Rec(bytes(r["key"]) if r["key"] is not None else None, bytes(r["value"]),
                tuple((h["key"], bytes(h["value"])) for h in (r["headers"] or [])))
            for r in rows]
