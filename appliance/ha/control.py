"""Announcements on the pair's control topic (``<group>.ha``): a planned handover asked
for (``appliance ha handover``), and a new active serving.

The control topic's one partition is what the group assigns to the active instance, so
the active reads it as any consumer reads its partition (``election``): a ``handover``
record written after it became active is addressed to it. ``serving`` records tell the
instance that handed over (and the command that asked) that the partner's query runs, so
the old query can stop without a gap, and carry what the pair's instances must agree on
(``partner``). Records are small JSON objects; unknown kinds are ignored (a newer
partner's).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition

from appliance.topics import offsets_consumer

HANDOVER = "handover"
SERVING = "serving"


@dataclass(frozen=True)
class Announcement:
    kind: str  # HANDOVER | SERVING
    instance: str  # who wrote it: the serving instance, or "cli" for a handover request
    at: float  # unix time it was written
    facts: dict[str, str] = field(default_factory=dict)  # serving: see ``partner``

    def encode(self) -> bytes:
        return json.dumps({"kind": self.kind, "instance": self.instance, "at": self.at,
                           "facts": self.facts}).encode()

    @classmethod
    def decode(cls, value: bytes | None) -> Announcement | None:
        """None for anything that is not an announcement (never an exception)."""
        try:
            data = json.loads(value or b"")
            facts = data.get("facts") or {}
            return cls(str(data["kind"]), str(data["instance"]), float(data["at"]),
                       {str(k): str(v) for k, v in facts.items()})
        except (ValueError, KeyError, TypeError, AttributeError):
            return None


def announce(client_config: dict, topic: str, kind: str, instance: str,
             facts: dict[str, str] | None = None) -> None:
    """Write one announcement to the control topic and wait for Kafka's acknowledgement."""
    producer = KafkaProducer(**client_config)
    try:
        producer.send(topic, Announcement(kind, instance, time.time(), facts or {}).encode(),
                      partition=0).get(timeout=15)
    finally:
        producer.close(timeout=5)


def group_members(client_config: dict, group: str) -> int:
    """How many instances the pair's group has now (0: none live, or no such group)."""
    admin = KafkaAdminClient(**client_config)
    try:
        info = admin.describe_groups([group]).get(group) or {}
    finally:
        admin.close()
    return len(info.get("members") or ())


def end_offset(client_config: dict, topic: str) -> int:
    """Where the next announcement will be written."""
    consumer = offsets_consumer(client_config)
    try:
        part = TopicPartition(topic, 0)
        return int(consumer.end_offsets([part])[part])
    finally:
        consumer.close()


def wait_for(client_config: dict, topic: str, kind: str, since: int, timeout_s: float,
             not_from: str | None = None,
             stop: threading.Event | None = None) -> Announcement | None:
    """The first ``kind`` announcement at or after offset ``since`` (not written by
    ``not_from``), or None after ``timeout_s`` or once ``stop`` is set."""
    consumer = KafkaConsumer(**{**client_config, "group_id": None,
                                "enable_auto_commit": False})
    try:
        part = TopicPartition(topic, 0)
        consumer.assign([part])
        consumer.seek(part, since)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and not (stop is not None and stop.is_set()):
            for records in consumer.poll(timeout_ms=200).values():
                for record in records:
                    found = Announcement.decode(record.value)
                    if found is not None and found.kind == kind \
                            and found.instance != not_from:
                        return found
        return None
    finally:
        consumer.close()


#: How far back ``latest`` looks: a few records per takeover, handover or reload.
LATEST_WINDOW = 1000


def latest(client_config: dict, topic: str, kind: str) -> Announcement | None:
    """The newest ``kind`` announcement on the control topic (None: none yet)."""
    consumer = KafkaConsumer(**{**client_config, "group_id": None,
                                "enable_auto_commit": False})
    try:
        part = TopicPartition(topic, 0)
        consumer.assign([part])
        end = int(consumer.end_offsets([part])[part])
        consumer.seek(part, max(0, end - LATEST_WINDOW))
        found = None
        deadline = time.monotonic() + 15
        while consumer.position(part) < end and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                for record in records:
                    announcement = Announcement.decode(record.value)
                    if announcement is not None and announcement.kind == kind:
                        found = announcement
        return found
    finally:
        consumer.close()
