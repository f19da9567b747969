"""Exact accounting of a fault run by ``alert_id``, independent of the load generator's
own collector: which alerting events were sent (recomputed from their indices), which
alert ids came back (read from the alerts topic, with the times Spark wrote them)."""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass, field

from kafka import KafkaConsumer, TopicPartition

from loadgen.events import EventFactory


@dataclass
class Accounting:
    expected: int
    received: int
    lost: list[str]
    duplicates: int
    first_alert_after: dict[str, float | None] = field(default_factory=dict)

    def line(self, label: str) -> str:
        firsts = ", ".join(f"{k} {'-' if v is None else f'{v:.1f} s'}"
                           for k, v in self.first_alert_after.items())
        return (f"{label}: expected {self.expected} lost {len(self.lost)} duplicates "
                f"{self.duplicates}" + (f"; first alert after {firsts}" if firsts else ""))


def alerting_ids(factory: EventFactory, sent: int) -> set[str]:
    """Ids of the alerting events among indices ``0..sent-1`` (one producer worker)."""
    return {factory.event_id(i) for i in range(sent)
            if factory.kind(i).startswith("alert:")}


def read_alerts(bootstrap: str, topic: str, run_id: str, expected: set[str],
                timeout: float) -> list[tuple[str, float]]:
    """``(alert_id, write time in epoch s)`` of this run's alerts, until all expected ids
    arrived or ``timeout``; then one more poll for stragglers/duplicates."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    prefix = run_id + "-"
    try:
        parts = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic) or ()]
        consumer.assign(parts)
        consumer.seek_to_beginning(*parts)
        out: list[tuple[str, float]] = []
        seen: set[str] = set()
        deadline = time.monotonic() + timeout

        def take(batches) -> None:
            for batch in batches.values():
                for record in batch:
                    alert_id = json.loads(record.value)["alert_id"]
                    if alert_id.startswith(prefix):
                        out.append((alert_id, record.timestamp / 1000.0))
                        seen.add(alert_id)

        while time.monotonic() < deadline and not expected <= seen:
            take(consumer.poll(timeout_ms=300))
        take(consumer.poll(timeout_ms=1500))
        return out
    finally:
        consumer.close()


def account(expected: set[str], alerts: list[tuple[str, float]],
            recoveries: dict[str, float] | None = None) -> Accounting:
    """``recoveries``: label -> epoch s a restart began; reports the first alert written
    after each (the time to first alert after recovery)."""
    counts = Counter(alert_id for alert_id, _t in alerts)
    firsts = {}
    for label, since in (recoveries or {}).items():
        after = [t for _a, t in alerts if t >= since]
        firsts[label] = (min(after) - since) if after else None
    return Accounting(len(expected), len(counts), sorted(expected - set(counts)),
                      sum(c - 1 for c in counts.values() if c > 1), firsts)


def account_alerts(bootstrap: str, topic: str, factory: EventFactory, sent: int,
                   recoveries: dict[str, float] | None = None,
                   timeout: float = 600) -> Accounting:
    """The accounting of one load run: its ``sent`` events' alerting ids against the alerts
    read back from ``topic`` (until all came, or ``timeout``)."""
    expected = alerting_ids(factory, sent)
    alerts = read_alerts(bootstrap, topic, factory.run_id, expected, timeout)
    return account(expected, alerts, recoveries)
