"""Producer worker processes: send events on schedule, never waiting for answers.

Each worker is its own process (so producing never competes for the GIL with the alert
collector) and sends the indices ``worker, worker + workers, ...``. It stamps every event
with its *scheduled* time, sends everything that is due, sleeps until the next event is
due, and records how far behind schedule it is instead of quietly sending slower. Events
still unsent ``drain_s`` after the end of the schedule are given up and reported.

An event the broker did not acknowledge (its delivery failed: the broker was down longer
than ``message.timeout.ms``, or refused it) is sent again, with its original scheduled
time, until acknowledged or ``retry_s`` after the schedule's end; only then does it count
as failed. So a broker that restarts costs latency, never events.
"""

from __future__ import annotations

import multiprocessing as mp
import time
from dataclasses import dataclass, field

from appliance.client_security import ClientSecurity
from loadgen.events import EventFactory
from loadgen.schedule import Schedule

# Slots per worker in the shared progress array.
SENT, LAG_S, MAX_LAG_S = 0, 1, 2
SLOTS = 3
MAX_SLEEP_S = 0.05
FAILED_INDICES_KEPT = 10_000


@dataclass(frozen=True)
class WorkerSpec:
    worker: int
    workers: int
    bootstrap: str
    topic: str
    schedule: Schedule
    run_id: str
    alert_ratio: float
    bad_ratio: float
    behind_ms: float
    drain_s: float
    linger_ms: float = 0.0
    retry_s: float = 120.0  # how long after the schedule unacknowledged events are re-sent
    security: ClientSecurity = field(default_factory=ClientSecurity)


@dataclass
class WorkerResult:
    worker: int
    sent: int  # indices handed to the client, in order: the worker's first `sent` indices
    failed: list[int]  # indices whose delivery failed for good (never in the topic)
    unsent: int  # due but given up at the drain deadline
    max_lag_ms: float
    late_events: int  # sent more than `behind_ms` after their scheduled time
    first_late_offset_s: float | None
    finished_at: float  # epoch seconds when the send loop ended (before the final flush)
    error: str | None = None
    resent: int = 0  # deliveries retried after the broker did not acknowledge them


def worker_main(spec: WorkerSpec, progress, t0, ready_q, start, result_q) -> None:
    """Process entry: connect, report ready, wait for the start time, send, report result."""
    from confluent_kafka import KafkaException, Producer

    from loadgen.kafka_config import producer_config

    unacknowledged: list[int] = []

    def on_delivery(err, msg) -> None:  # only called for failures (delivery.report.only.error)
        if err is not None:
            index = factory.index_in_raw(msg.value() or b"")
            unacknowledged.append(-1 if index is None else index)

    factory = EventFactory(spec.run_id, spec.alert_ratio, spec.bad_ratio)
    try:
        producer = Producer({**producer_config(spec.bootstrap, spec.linger_ms,
                                               spec.security),
                             "on_delivery": on_delivery})
        metadata = producer.list_topics(spec.topic, timeout=10)
        topic_meta = metadata.topics.get(spec.topic)
        if topic_meta is None or topic_meta.error is not None or not topic_meta.partitions:
            raise RuntimeError(f"topic {spec.topic!r} is not available on {spec.bootstrap}")
    except (KafkaException, RuntimeError) as exc:
        ready_q.put(("error", spec.worker, str(exc)))
        return
    ready_q.put(("ready", spec.worker, ""))
    if not start.wait(timeout=60):
        return
    resender = Resender(spec, factory, producer, unacknowledged, t0.value)
    result = _send_all(spec, factory, producer, progress, t0.value, resender)
    result.failed = resender.finish(result.finished_at + spec.retry_s)
    result.resent = resender.resent
    remaining = len(producer)
    if remaining:
        result.error = f"{remaining} events still unacknowledged after flush"
    result_q.put(result)


class Resender:
    """Sends again what the broker did not acknowledge, with its original scheduled time."""

    def __init__(self, spec: WorkerSpec, factory: EventFactory, producer, unacknowledged,
                 t0: float):
        self.spec, self.factory, self.producer, self.t0 = spec, factory, producer, t0
        self.unacknowledged = unacknowledged  # appended to by the delivery callback
        self.resent = 0
        self.failed: list[int] = []

    def resend(self, budget: int = 1000) -> None:
        """Re-produce up to ``budget`` unacknowledged events (called between sends)."""
        queue = self.unacknowledged
        while queue and budget > 0:
            i = queue.pop()
            if i < 0:  # not one of ours: cannot be rebuilt
                self.failed.append(i)
                continue
            due = self.t0 + self.spec.schedule.offset(i)
            try:
                self.producer.produce(self.spec.topic, self.factory.encode(i, due * 1000.0))
            except BufferError:
                queue.append(i)
                return
            self.resent += 1
            budget -= 1

    def finish(self, deadline: float) -> list[int]:
        """Keep re-sending until everything is acknowledged or ``deadline`` (epoch s)."""
        while time.time() < deadline:
            self.producer.poll(0.05)
            self.resend()
            if not self.unacknowledged and len(self.producer) == 0:
                break
        self.producer.flush(timeout=max(0.0, min(30.0, deadline - time.time())))
        failed = self.failed + list(self.unacknowledged)
        return failed[:FAILED_INDICES_KEPT]


def _send_all(spec, factory, producer, progress, t0: float, resender: Resender) -> WorkerResult:
    schedule, workers, topic = spec.schedule, spec.workers, spec.topic
    base = spec.worker * SLOTS
    behind_s = spec.behind_ms / 1000.0
    total = schedule.total
    give_up_at = t0 + schedule.duration + spec.drain_s
    i, sent, late, max_lag, first_late = spec.worker, 0, 0, 0.0, None
    produce, poll, now_fn, sleep = producer.produce, producer.poll, time.time, time.sleep
    while i < total:
        due = t0 + schedule.offset(i)
        now = now_fn()
        if due > now:
            poll(0)
            if resender.unacknowledged:
                resender.resend()
            progress[base + SENT] = sent
            progress[base + LAG_S] = 0.0
            sleep(min(due - now, MAX_SLEEP_S))
            continue
        if now > give_up_at:
            break
        try:
            produce(topic, factory.encode(i, due * 1000.0))
        except BufferError:
            poll(0.001)
            continue
        # Read after produce(): the client stamps the record's timestamp inside it, so the
        # lag covers the encoding and any preemption before that stamp (tests compare the
        # in-band latency, which starts at the stamp, with this schedule's).
        lag = now_fn() - due
        if lag > behind_s:
            late += 1
            if first_late is None:
                first_late = due - t0
        if lag > max_lag:
            max_lag = lag
        sent += 1
        i += workers
        if sent & 15 == 0:
            poll(0)
            progress[base + SENT] = sent
            progress[base + LAG_S] = lag
            progress[base + MAX_LAG_S] = max_lag
    progress[base + SENT] = sent
    progress[base + MAX_LAG_S] = max_lag
    unsent = len(range(i, total, workers))
    return WorkerResult(spec.worker, sent, [], unsent, round(max_lag * 1000.0, 3), late,
                        None if first_late is None else round(first_late, 3), now_fn())


def spawn_context() -> mp.context.SpawnContext:
    """Spawn, never fork: librdkafka's threads do not survive a fork."""
    return mp.get_context("spawn")
