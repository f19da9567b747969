"""The nemesis's own load and reader, which remember what the checker needs.

The load generator (``loadgen``) counts alerts; the nemesis must account for every record,
so it needs, for each event, the exact bytes sent, when, and where the broker put them, and
every output record with its topic, partition and offset. ``Load`` sends the loadgen's
event mix (``EventFactory``: alerting, normal and bad records, bad UTF-8 included) at a
steady rate from a thread, keyed by event id, and re-sends the same bytes until the broker
acknowledges them; ``Reader`` reads the alerts and dead-letter topics from the start the
whole run long. Both use confluent-kafka, which reconnects by itself through broker
restarts and partitions and releases the GIL while it waits.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition

from loadgen.events import BAD_KINDS, EventFactory
from loadgen.kafka_config import consumer_config, producer_config

from support.faults.nemesis_check import Location, OutputRecord, SentEvent

POLL_S = 0.2
MAX_SLEEP_S = 0.02


@dataclass
class Sent:
    """What the load knows of one event while the run goes on."""

    index: int
    key: bytes
    raw: bytes
    kind: str
    sent_at: float
    acknowledged: list[Location] = field(default_factory=list)


class Load:
    """``rate`` events/s to ``topic`` from a thread, from ``start()`` until ``stop()``."""

    def __init__(self, bootstrap: str, topic: str, rate: float, alert_ratio: float,
                 bad_ratio: float, run_id: str):
        self.topic, self.rate = topic, rate
        self.factory = EventFactory(run_id, alert_ratio, bad_ratio)
        self.sent: list[Sent] = []
        self.resent = 0
        self.error: BaseException | None = None
        self._unacknowledged: list[int] = []  # appended by delivery callbacks
        self._stop = threading.Event()
        self._producer = Producer({**producer_config(bootstrap, linger_ms=1.0),
                                   "client.id": "nemesis-load",
                                   "delivery.report.only.error": False})
        self._thread = threading.Thread(target=self._run, name="nemesis-load", daemon=True)

    def start(self) -> Load:
        self._thread.start()
        return self

    @property
    def next_index(self) -> int:
        """The index the next event will have (events below it were sent)."""
        return len(self.sent)

    def _run(self) -> None:
        try:
            t0 = time.time()
            while not self._stop.is_set():
                due = t0 + len(self.sent) / self.rate
                now = time.time()
                if due > now:
                    self._producer.poll(min(due - now, MAX_SLEEP_S))
                    self._resend()
                    continue
                self._send_new(now)
        except BaseException as exc:  # handed to the test by stop()
            self.error = exc

    def _send_new(self, now: float) -> None:
        i = len(self.sent)
        event = Sent(i, self.factory.event_id(i).encode(),
                     self.factory.encode(i, now * 1000.0), self.factory.kind(i), now)
        self.sent.append(event)
        self._produce(event)

    def _produce(self, event: Sent) -> None:
        for _ in range(1000):  # bounded: a full local queue drains within seconds
            try:
                self._producer.produce(self.topic, event.raw, event.key,
                                       on_delivery=self._delivered(event))
                return
            except BufferError:
                self._producer.poll(0.01)
        raise RuntimeError("the producer's queue stayed full")

    def _delivered(self, event: Sent):
        def on_delivery(err, msg) -> None:
            if err is None:
                event.acknowledged.append(Location(msg.topic(), msg.partition(),
                                                   msg.offset()))
            else:
                self._unacknowledged.append(event.index)
        return on_delivery

    def _resend(self) -> None:
        while self._unacknowledged:
            self.resent += 1
            self._produce(self.sent[self._unacknowledged.pop()])

    def stop(self, timeout: float = 120.0) -> None:
        """End the schedule and keep re-sending until every event is acknowledged (bounded
        by ``timeout``); raises if that failed."""
        self._stop.set()
        self._thread.join(timeout=10)
        if self.error is not None:
            raise self.error
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and (self._unacknowledged or len(self._producer)):
            self._producer.poll(POLL_S)
            self._resend()
        missing = [e.index for e in self.sent if not e.acknowledged]
        assert not missing, f"{len(missing)} events never acknowledged: {missing[:20]}"

    def close(self) -> None:
        """End the schedule without waiting for acknowledgements (cleanup after a failure)."""
        self._stop.set()
        self._thread.join(timeout=10)


def _consumer(bootstrap: str, name: str) -> Consumer:
    return Consumer({**consumer_config(bootstrap, fetch_wait_ms=100),
                     "client.id": name, "group.id": name,
                     "auto.offset.reset": "earliest"})


def _partitions(consumer: Consumer, topic: str) -> list[int]:
    meta = consumer.list_topics(topic, timeout=30).topics[topic]
    if meta.error is not None or not meta.partitions:
        raise RuntimeError(f"topic {topic}: {meta.error}")
    return sorted(meta.partitions)


class Reader:
    """Every record of ``topics`` from offset 0, read in a thread until ``close()``; keeps
    the highest event index (the record key is the event id) that had an output."""

    def __init__(self, bootstrap: str, topics: list[str], factory: EventFactory):
        self.factory = factory
        self.records: dict[str, list[OutputRecord]] = defaultdict(list)
        self.latest = -1  # the highest event index with an output so far
        self.error: BaseException | None = None
        self._consumer = _consumer(bootstrap, "nemesis-reader")
        self._consumer.assign([TopicPartition(t, p, OFFSET_BEGINNING) for t in topics
                               for p in _partitions(self._consumer, t)])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="nemesis-reader", daemon=True)

    def start(self) -> Reader:
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                for msg in self._consumer.consume(num_messages=1000, timeout=POLL_S):
                    self._take(msg)
        except BaseException as exc:  # handed to the test by stop()
            self.error = exc

    def _take(self, msg) -> None:
        if msg.error() is not None:
            return  # transient (broker gone, partition EOF): the client retries by itself
        key = msg.key()
        record = OutputRecord(Location(msg.topic(), msg.partition(), msg.offset()), key,
                              msg.value() or b"")
        self.records[record.location.topic].append(record)
        index = self.factory.index_of(key.decode("utf-8", "replace")) if key else None
        if index is not None and index > self.latest:
            self.latest = index

    def close(self) -> None:
        if not self._stop.is_set():
            self._stop.set()
            self._thread.join(timeout=30)
            self._consumer.close()


def read_topic(bootstrap: str, topic: str, timeout: float = 120.0) -> list[OutputRecord]:
    """The whole of ``topic`` up to its current end, with locations."""
    consumer = _consumer(bootstrap, "nemesis-events")
    try:
        parts = _partitions(consumer, topic)
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
                for p in parts}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])
        records: list[OutputRecord] = []
        done = {p for p, end in ends.items() if end == 0}
        deadline = time.monotonic() + timeout
        while len(done) < len(parts):
            if time.monotonic() > deadline:
                raise AssertionError(f"{topic}: not read to its end in {timeout:g} s")
            for msg in consumer.consume(num_messages=1000, timeout=POLL_S):
                if msg.error() is not None:
                    continue
                records.append(OutputRecord(Location(topic, msg.partition(), msg.offset()),
                                            msg.key(), msg.value() or b""))
                if msg.offset() >= ends[msg.partition()] - 1:
                    done.add(msg.partition())
        return records
    except KafkaException as exc:
        raise AssertionError(f"{topic}: {exc}") from exc
    finally:
        consumer.close()


def sent_events(load: Load, events_topic: list[OutputRecord]) -> list[SentEvent]:
    """The checker's view of what was sent: each event with every record of the events
    topic that holds exactly its bytes."""
    written: dict[bytes, list[Location]] = defaultdict(list)
    for record in events_topic:
        written[record.value].append(record.location)
    return [SentEvent(e.index, e.key, e.raw, e.kind.startswith("alert:"), e.kind in BAD_KINDS,
                      e.sent_at, tuple(written.get(e.raw, ())), tuple(e.acknowledged))
            for e in load.sent]
