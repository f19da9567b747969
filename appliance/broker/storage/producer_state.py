"""Idempotent-producer de-duplication for one partition, bounded.

Like Kafka, the last five batches of each producer id are remembered so a retried batch
(same id, epoch and sequence range) is acknowledged with its original offset instead of
being appended twice, and a gap in sequence numbers is refused as out of order.

Bounded like Kafka's too: a producer that has not written for ``expiration_ms`` (Kafka's
``producer.id.expiration.ms``, a day) is forgotten, and a partition remembers at most
``max_producers`` (the least recently written goes first). A forgotten producer that
writes again is answered UNKNOWN_PRODUCER_ID if its sequence does not start a new one;
Kafka's clients then reset their sequence (Java since 2.5) and carry on.

The state survives a restart without reading the log back: ``snapshot`` is written
beside the segments when one rolls and at a clean stop, and recovery replays only the
batches after it (``record`` per batch header).
"""

from __future__ import annotations

import json
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import NamedTuple

from appliance.broker.wire import errors

REMEMBERED_BATCHES = 5
_SEQ_WRAP = 1 << 31
DEFAULT_EXPIRATION_MS = 86_400_000  # Kafka's producer.id.expiration.ms
DEFAULT_MAX_PRODUCERS = 1000


def last_sequence(base_sequence: int, last_offset_delta: int) -> int:
    return (base_sequence + last_offset_delta) % _SEQ_WRAP


@dataclass
class _Producer:
    epoch: int
    last_ms: int = 0  # broker clock of its last write
    batches: deque = field(default_factory=lambda: deque(maxlen=REMEMBERED_BATCHES))
    coordinator_epoch: int = -1  # of the last transaction marker (-1: none yet)


class ActiveProducer(NamedTuple):
    """One producer a partition remembers, as DescribeProducers reports it."""

    producer_id: int
    epoch: int
    last_sequence: int  # of its last batch (-1: none since its epoch began)
    last_timestamp: int  # the broker's clock at its last write or marker
    coordinator_epoch: int


class ProducerStates:
    def __init__(self, max_producers: int = DEFAULT_MAX_PRODUCERS,
                 expiration_ms: int = DEFAULT_EXPIRATION_MS) -> None:
        # least recently written first: eviction pops from the front
        self._producers: OrderedDict[int, _Producer] = OrderedDict()
        self.max_producers = max_producers
        self.expiration_ms = expiration_ms

    def __len__(self) -> int:
        return len(self._producers)

    def check(self, pid: int, epoch: int, first_seq: int, last_seq: int) -> tuple[int, int]:
        """(error_code, duplicate_base_offset or -1) for a batch about to be appended."""
        p = self._producers.get(pid)
        if p is None:
            return (errors.NONE, -1) if first_seq == 0 else (errors.UNKNOWN_PRODUCER_ID, -1)
        if epoch < p.epoch:
            return errors.INVALID_PRODUCER_EPOCH, -1
        if epoch > p.epoch:
            return (errors.NONE, -1) if first_seq == 0 else (
                errors.OUT_OF_ORDER_SEQUENCE_NUMBER, -1)
        for f, last, base in p.batches:
            if f == first_seq and last == last_seq:
                return errors.NONE, base
        expected = (p.batches[-1][1] + 1) % _SEQ_WRAP if p.batches else 0
        if first_seq != expected:
            return errors.OUT_OF_ORDER_SEQUENCE_NUMBER, -1
        return errors.NONE, -1

    def record(self, pid: int, epoch: int, first_seq: int, last_seq: int, base: int,
               now_ms: int) -> None:
        p = self._producers.get(pid)
        if p is None or epoch != p.epoch:
            p = self._producers[pid] = _Producer(epoch)
        entry = (first_seq, last_seq, base)
        if entry not in p.batches:  # recovery replays batches a snapshot already holds
            p.batches.append(entry)
        p.last_ms = max(p.last_ms, now_ms)
        self._producers.move_to_end(pid)
        while len(self._producers) > self.max_producers:
            self._producers.popitem(last=False)

    def epoch_of(self, pid: int) -> int | None:
        p = self._producers.get(pid)
        return None if p is None else p.epoch

    def fence(self, pid: int, epoch: int, now_ms: int, coordinator_epoch: int) -> None:
        """A transaction marker of ``epoch``: older epochs of the producer are refused
        from now on (a newer epoch starts its sequence again)."""
        p = self._producers.get(pid)
        if p is None or epoch > p.epoch:
            p = self._producers[pid] = _Producer(epoch)
        p.last_ms = max(p.last_ms, now_ms)
        p.coordinator_epoch = coordinator_epoch
        self._producers.move_to_end(pid)

    def active(self) -> list[ActiveProducer]:
        """Every producer remembered, least recently written first."""
        return [ActiveProducer(pid, p.epoch, p.batches[-1][1] if p.batches else -1,
                               p.last_ms, p.coordinator_epoch)
                for pid, p in list(self._producers.items())]

    def expire(self, now_ms: int) -> int:
        """Forget producers idle for ``expiration_ms``; how many went."""
        gone = 0
        while self._producers:
            pid, p = next(iter(self._producers.items()))
            if p.last_ms >= now_ms - self.expiration_ms:
                break
            del self._producers[pid]
            gone += 1
        return gone

    def snapshot(self, pids: set[int]) -> dict[int, _Producer | None]:
        """A copy of these producers' state, for ``restore`` if an append is undone."""
        out: dict[int, _Producer | None] = {}
        for pid in pids:
            p = self._producers.get(pid)
            out[pid] = None if p is None else _Producer(p.epoch, p.last_ms,
                                                        deque(p.batches, REMEMBERED_BATCHES),
                                                        p.coordinator_epoch)
        return out

    def restore(self, snapshot: dict[int, _Producer | None]) -> None:
        for pid, p in snapshot.items():
            if p is None:
                self._producers.pop(pid, None)
            else:
                self._producers[pid] = p

    # -- persisted form -------------------------------------------------------------------

    def to_json(self, offset: int) -> bytes:
        """The state as of ``offset`` (every batch below it is in it)."""
        return json.dumps({"offset": offset, "producers": [
            [pid, p.epoch, p.last_ms, [list(b) for b in p.batches], p.coordinator_epoch]
            for pid, p in self._producers.items()]}, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, data: bytes, max_producers: int = DEFAULT_MAX_PRODUCERS,
                  expiration_ms: int = DEFAULT_EXPIRATION_MS) -> tuple[ProducerStates, int]:
        """(state, the offset it covers up to); ValueError if the bytes are not one."""
        try:
            doc = json.loads(data)
            out = cls(max_producers, expiration_ms)
            for pid, epoch, last_ms, batches, *marked in doc["producers"]:
                # a snapshot before DescribeProducers has no coordinator epoch
                p = _Producer(int(epoch), int(last_ms),
                              coordinator_epoch=int(marked[0]) if marked else -1)
                for f, last, base in batches:
                    p.batches.append((int(f), int(last), int(base)))
                out._producers[int(pid)] = p
            return out, int(doc["offset"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a producer state snapshot: {exc}") from None
