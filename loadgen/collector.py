"""The alert collector: consumes alerts and dead letters and does the accounting.

It runs in the parent process while the producers run in their own, and starts reading
each topic at its end offset *before* the first event is sent, so every answer to this
run is seen and nothing older is. Records of other runs (another ``run_id``) are counted
as foreign and otherwise ignored. In floor mode it reads the events topic itself: each
good event is its own "alert", so the latency is the instrument's own floor.
"""

from __future__ import annotations

import base64
import json
import time

from confluent_kafka import TIMESTAMP_NOT_AVAILABLE, Consumer, KafkaException, TopicPartition

from appliance.client_security import ClientSecurity
from loadgen.events import BAD_KINDS, NORMAL, EventFactory
from loadgen.kafka_config import PLAINTEXT, consumer_config
from loadgen.latency import LatencyRecorder

ALERTS, FLOOR = "alerts", "floor"
BATCH = 1000


class BrokerUnavailable(RuntimeError):
    """The broker cannot be reached or lacks a topic the run needs."""


def end_offsets(consumer, topics: list[str], bootstrap: str, timeout: float = 10.0) -> list:
    """Every partition of ``topics`` at its current end offset, ready for ``assign``."""
    assignment = []
    try:
        metadata = consumer.list_topics(timeout=timeout)
        for topic in topics:
            meta = metadata.topics.get(topic)
            if meta is None or meta.error is not None or not meta.partitions:
                raise BrokerUnavailable(f"topic {topic!r} does not exist on {bootstrap}")
            for partition in sorted(meta.partitions):
                tp = TopicPartition(topic, partition)
                _low, high = consumer.get_watermark_offsets(tp, timeout=timeout)
                assignment.append(TopicPartition(topic, partition, high))
    except KafkaException as exc:
        raise BrokerUnavailable(f"cannot read topics from {bootstrap}: {exc}") from exc
    return assignment


class Collector:
    def __init__(self, bootstrap: str, factory: EventFactory, total: int, alerts_topic: str,
                 dlq_topic: str | None, mode: str = ALERTS, on_latency=None,
                 security: ClientSecurity = PLAINTEXT):
        self.factory = factory
        self.mode = mode
        self.alerts_topic = alerts_topic
        self.dlq_topic = dlq_topic
        self.total = total
        self.latency = LatencyRecorder()
        self.alert_seen = bytearray(total)
        self.dlq_seen = bytearray(total)
        self.duplicates = 0
        self.dlq_duplicates = 0
        self.unexpected_alerts = 0
        self.foreign = 0
        self.malformed_answers = 0
        self.received = 0  # unique alert ids of this run
        self.dlq_received = 0
        self.t0_ms = 0.0
        # The longest an alert took from its own Kafka timestamp (stamped by the appliance's
        # producer) to this collector: produce ack, fetch and our polling. It is the part
        # of loadgen's latency an in-appliance clock cannot see.
        self.delivery_max_ms: float | None = None
        self.on_latency = on_latency
        self._id_key = "alert_id" if mode == ALERTS else "event_id"
        self._bootstrap = bootstrap
        self._security = security
        self._consumer: Consumer | None = None

    def start(self, timeout: float = 10.0) -> None:
        """Assign every partition of the answer topics at its current end offset."""
        consumer = Consumer(consumer_config(self._bootstrap, security=self._security))
        topics = [t for t in (self.alerts_topic, self.dlq_topic) if t]
        try:
            consumer.assign(end_offsets(consumer, topics, self._bootstrap, timeout))
        except BrokerUnavailable:
            consumer.close()
            raise
        self._consumer = consumer

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    def poll(self, timeout: float) -> int:
        """Consume what arrives within ``timeout`` seconds; returns records handled."""
        # consume() waits for a full batch or the timeout, so block only in poll(), which
        # returns on the first record, then take whatever else is already there.
        consumer = self._consumer
        if consumer is None:
            raise RuntimeError("Collector.poll before start()")
        messages = consumer.consume(BATCH, 0)
        if not messages:
            first = consumer.poll(timeout)
            if first is None:
                return 0
            messages = [first, *consumer.consume(BATCH - 1, 0)]
        # One clock read per batch: every record in it had arrived by now, and handling
        # the earlier ones must not count as latency of the later ones.
        now_ms = time.time() * 1000.0
        for message in messages:
            if message.error() is not None:
                continue
            if message.topic() == self.dlq_topic:
                self._dead_letter(message.value())
            else:
                self._answer(message.value(), now_ms, message.timestamp())
        return len(messages)

    def _answer(self, value: bytes | None, now_ms: float, timestamp: tuple[int, int]) -> None:
        """``timestamp``: the alert record's Kafka (type, ms), as confluent-kafka gives it."""
        try:
            record = json.loads(value or b"")  # a null value: malformed, as bad JSON
            index = self.factory.index_of(record.get(self._id_key))
            ts = record.get("ts")
        except (ValueError, TypeError, AttributeError):
            self.malformed_answers += 1
            return
        if index is None or index >= self.total:
            self.foreign += 1
            return
        if self.alert_seen[index]:
            self.duplicates += 1
            return
        self.alert_seen[index] = 1
        self.received += 1
        if self.mode == ALERTS and not self.factory.kind(index).startswith("alert:"):
            self.unexpected_alerts += 1
        if not isinstance(ts, (int, float)):
            self.malformed_answers += 1
            return
        latency_ms = now_ms - ts
        self.latency.record(latency_ms, int((ts - self.t0_ms) // 1000.0))
        kind, stamp_ms = timestamp
        if kind != TIMESTAMP_NOT_AVAILABLE:
            delivery = now_ms - stamp_ms
            if self.delivery_max_ms is None or delivery > self.delivery_max_ms:
                self.delivery_max_ms = delivery
        if self.on_latency is not None:
            self.on_latency(latency_ms)

    def _dead_letter(self, value: bytes | None) -> None:
        try:
            letter = json.loads(value or b"")
            raw = letter["raw"]
            raw_bytes = (base64.b64decode(raw) if letter.get("encoding") == "base64"
                         else raw.encode("utf-8"))
        except (ValueError, TypeError, KeyError, AttributeError):
            self.malformed_answers += 1
            return
        index = self.factory.index_in_raw(raw_bytes)
        if index is None or index >= self.total:
            self.foreign += 1
            return
        if self.dlq_seen[index]:
            self.dlq_duplicates += 1
            return
        self.dlq_seen[index] = 1
        self.dlq_received += 1

    def _sent_kinds(self, sent_indices: list[range], failed: set[int]):
        """(index, kind) of every event that reached the broker."""
        kind = self.factory.kind
        for indices in sent_indices:
            for i in indices:
                if i not in failed:
                    yield i, (kind(i) if self.mode == ALERTS else "alert:floor")

    def expected(self, sent_indices: list[range], failed: set[int]) -> tuple[int, int]:
        """(alerts, dead letters) the sent events should produce."""
        alerts = dead = 0
        for _, k in self._sent_kinds(sent_indices, failed):
            if k.startswith("alert:"):
                alerts += 1
            elif k in BAD_KINDS:
                dead += 1
            elif k != NORMAL:
                raise AssertionError(k)
        return alerts, dead

    def missing(self, sent_indices: list[range], failed: set[int]) -> tuple[int, int]:
        """(alerts, dead letters) expected but not (yet) received."""
        lost_alerts = lost_dead = 0
        for i, k in self._sent_kinds(sent_indices, failed):
            if k.startswith("alert:") and not self.alert_seen[i]:
                lost_alerts += 1
            elif k in BAD_KINDS and not self.dlq_seen[i]:
                lost_dead += 1
        return lost_alerts, lost_dead
