"""Idempotent-producer de-duplication for one partition.

Like Kafka, the last five batches of each producer id are remembered so a retried batch
(same id, epoch and sequence range) is acknowledged with its original offset instead of
being appended twice, and a gap in sequence numbers is refused as out of order.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from appliance.broker.wire import errors

REMEMBERED_BATCHES = 5
_SEQ_WRAP = 1 << 31


def last_sequence(base_sequence: int, last_offset_delta: int) -> int:
    return (base_sequence + last_offset_delta) % _SEQ_WRAP


@dataclass
class _Producer:
    epoch: int
    batches: deque = field(default_factory=lambda: deque(maxlen=REMEMBERED_BATCHES))


class ProducerStates:
    def __init__(self) -> None:
        self._producers: dict[int, _Producer] = {}

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

    def record(self, pid: int, epoch: int, first_seq: int, last_seq: int, base: int) -> None:
        p = self._producers.get(pid)
        if p is None or epoch != p.epoch:
            p = self._producers[pid] = _Producer(epoch)
        p.batches.append((first_seq, last_seq, base))

    def snapshot(self, pids: set[int]) -> dict[int, _Producer | None]:
        """A copy of these producers' state, for ``restore`` if an append is undone."""
        out: dict[int, _Producer | None] = {}
        for pid in pids:
            p = self._producers.get(pid)
            out[pid] = None if p is None else _Producer(p.epoch, deque(p.batches,
                                                                   REMEMBERED_BATCHES))
        return out

    def restore(self, snapshot: dict[int, _Producer | None]) -> None:
        for pid, p in snapshot.items():
            if p is None:
                self._producers.pop(pid, None)
            else:
                self._producers[pid] = p

    def max_producer_id(self) -> int:
        return max(self._producers, default=-1)
