"""One partition's log: whole record batches in offset order, with an O(log n) offset index.

Batches are kept as received (only baseOffset/leader epoch rewritten). The high watermark
is the next offset to assign, exact after every append since this is a single replica.
Fetches that wait for data register a waiter here and are woken by ``append``.
"""

from __future__ import annotations

import bisect
from typing import TYPE_CHECKING, NamedTuple, Protocol

from appliance.broker.storage.durable_io import StorageError
from appliance.broker.storage.producer_state import ProducerStates, last_sequence
from appliance.broker.wire import errors
from appliance.broker.wire.records import BatchHeader, first_offset_at_or_after, with_base_offset
from appliance.logs import get_logger

if TYPE_CHECKING:
    from appliance.broker.storage.segments import PartitionSegments

LEADER_EPOCH = 0
log = get_logger("appliance.broker")


class Appended(NamedTuple):
    """A produce's outcome for one partition."""

    error: int
    base_offset: int  # -1 on error
    message: str | None = None  # for the response's error_message


class Waiter(Protocol):
    def notify(self, nbytes: int) -> None: ...


class PartitionLog:
    def __init__(self, topic: str, index: int, segments: PartitionSegments | None = None):
        self.topic = topic
        self.index = index
        self.segments = segments
        self._batches: list[bytes] = []
        self._bases: list[int] = []  # baseOffset of each batch (bisect index)
        self._ends: list[int] = []  # cumulative byte count after each batch
        self._appended_ms: list[int] = []  # broker clock at append, for time retention
        self._max_ts: list[int] = []  # running max of batch maxTimestamp (monotonic)
        self._head = 0  # first live batch; earlier ones were removed by retention
        self.log_start_offset = 0
        self.high_watermark = 0
        self.producers = ProducerStates()
        self.waiters: set[Waiter] = set()
        self._refused = 0  # produces refused by the disk since the last append that worked

    # -- write path ---------------------------------------------------------------------

    def append(self, records: memoryview, headers: list[BatchHeader], now_ms: int,
               max_message_bytes: int) -> Appended:
        """Append a validated record set, all of it or none: a batch refused (sequence,
        epoch) or a failed disk write leaves the log and producer state as they were."""
        for h in headers:
            if h.size > max_message_bytes:
                return Appended(errors.MESSAGE_TOO_LARGE, -1,
                                f"record batch larger than max.message.bytes="
                                f"{max_message_bytes}")
        first_base = -1
        base = self.high_watermark
        new: list[tuple[bytes, int, BatchHeader]] = []
        pids = {h.producer_id for h in headers if h.producer_id >= 0}
        undo = self.producers.snapshot(pids) if pids else None
        for h in headers:
            idempotent = h.producer_id >= 0
            if idempotent:
                last_seq = last_sequence(h.base_sequence, h.last_offset_delta)
                err, dup = self.producers.check(h.producer_id, h.producer_epoch,
                                                h.base_sequence, last_seq)
                if err:
                    if undo:
                        self.producers.restore(undo)
                    return Appended(err, -1)
                if dup >= 0:
                    if first_base < 0:
                        first_base = dup
                    continue
                # recorded now: a later batch of the same producer in this set follows it
                self.producers.record(h.producer_id, h.producer_epoch, h.base_sequence,
                                      last_seq, base)
            new.append((with_base_offset(records[h.start:h.start + h.size], base,
                                         LEADER_EPOCH), base, h))
            if first_base < 0:
                first_base = base
            base += h.last_offset_delta + 1
        if not new:
            return Appended(errors.NONE, first_base)
        if self.segments is not None:  # disk first: never serve what was not written
            try:
                self.segments.append([(batch, b) for batch, b, _ in new])
            except StorageError as exc:
                if undo:
                    self.producers.restore(undo)
                self.segments.stats.append_failed(exc)
                if not self._refused:  # once per outage, not once per retried produce
                    log.warning("broker.append_failed", topic=self.topic,
                                partition=self.index, error=str(exc), errno=exc.errno_name)
                self._refused += 1
                return Appended(errors.KAFKA_STORAGE_ERROR, -1, str(exc))
            if self._refused:
                log.info("broker.append_recovered", topic=self.topic, partition=self.index,
                         refused_produces=self._refused)
                self._refused = 0
        appended = 0
        for batch, b, h in new:
            self._store(batch, b, h.last_offset_delta, h.max_timestamp, now_ms)
            appended += len(batch)
        if self.waiters:
            for w in list(self.waiters):
                w.notify(appended)
        return Appended(errors.NONE, first_base)

    def _store(self, batch: bytes, base: int, last_offset_delta: int, max_ts: int,
               now_ms: int) -> None:
        prev_end = self._ends[-1] if self._ends else 0
        prev_max = self._max_ts[-1] if self._max_ts else -1
        self._batches.append(batch)
        self._bases.append(base)
        self._ends.append(prev_end + len(batch))
        self._appended_ms.append(now_ms)
        self._max_ts.append(max(prev_max, max_ts))
        self.high_watermark = base + last_offset_delta + 1

    def load(self, batch: bytes, header: BatchHeader, base: int, now_ms: int,
             expired: bool = False) -> None:
        """Recovery: re-insert a batch read back from a segment file.

        An ``expired`` batch (below the checkpointed log start) only restores offsets and
        producer state; it is not served again.
        """
        if expired:
            self.log_start_offset = self.high_watermark = base + header.last_offset_delta + 1
        else:
            if not self._batches:
                self.log_start_offset = base
                self.high_watermark = base
            self._store(batch, base, header.last_offset_delta, header.max_timestamp, now_ms)
        if header.producer_id >= 0:
            self.producers.record(header.producer_id, header.producer_epoch,
                                  header.base_sequence,
                                  last_sequence(header.base_sequence,
                                                header.last_offset_delta), base)

    def recovered_log_start(self, offset: int) -> None:
        """Recovery: everything below the checkpointed log start stays expired (it may lie
        inside a batch: DeleteRecords moves it to any offset)."""
        if offset > self.high_watermark:  # every batch had expired and its file was gone
            self.log_start_offset = self.high_watermark = offset
        elif offset > self.log_start_offset:
            self.log_start_offset = offset

    # -- read path ----------------------------------------------------------------------

    def _index_of(self, offset: int) -> int:
        return bisect.bisect_right(self._bases, offset, self._head) - 1

    def read(self, offset: int, max_bytes: int,
             at_least_one: bool) -> tuple[int, list[bytes], int]:
        """(error_code, whole batches from the one containing ``offset``, their byte count)."""
        if offset < self.log_start_offset or offset > self.high_watermark:
            return errors.OFFSET_OUT_OF_RANGE, [], 0
        if offset == self.high_watermark:
            return errors.NONE, [], 0
        i = max(self._index_of(offset), self._head)
        out: list[bytes] = []
        total = 0
        n = len(self._batches)
        while i < n:
            b = self._batches[i]
            if total + len(b) > max_bytes and (out or not at_least_one):
                break
            out.append(b)
            total += len(b)
            i += 1
        return errors.NONE, out, total

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int]:
        """(offset, timestamp) of the first record with timestamp >= target, else (-1, -1)."""
        i = bisect.bisect_left(self._max_ts, timestamp, self._head)
        while i < len(self._batches):
            hit = first_offset_at_or_after(self._batches[i], timestamp)
            if hit is not None:
                return hit
            i += 1
        return -1, -1

    # -- retention ----------------------------------------------------------------------

    def size_bytes(self) -> int:
        if self._head == len(self._batches):
            return 0
        h = self._head
        return self._ends[-1] - (self._ends[h] - len(self._batches[h]))

    def enforce_retention(self, now_ms: int, retention_bytes: int | None,
                          retention_ms: int | None) -> int:
        """Drop whole batches from the head; returns how many were dropped."""
        dropped = 0
        n = len(self._batches)
        while self._head < n:
            too_big = retention_bytes is not None and self.size_bytes() > retention_bytes
            too_old = (retention_ms is not None
                       and self._appended_ms[self._head] < now_ms - retention_ms)
            if not (too_big or too_old):
                break
            self._batches[self._head] = b""
            self._head += 1
            dropped += 1
        if dropped:
            self.log_start_offset = max(self.log_start_offset,
                                        self._bases[self._head] if self._head < n
                                        else self.high_watermark)
            if self.segments is not None:
                self.segments.drop_before(self.log_start_offset)
            if self._head > 1024 and self._head * 2 > n:
                self._compact()
        return dropped

    def delete_records(self, offset: int) -> int:
        """DeleteRecords: records below ``offset`` are gone; returns the new log start.

        The log start may fall inside a batch: that batch stays (batches are never cut)
        but nothing below the log start is served again. Whole batches below it go.
        """
        if offset <= self.log_start_offset:
            return self.log_start_offset
        self.log_start_offset = offset
        n = len(self._batches)
        while self._head < n:
            following = self._bases[self._head + 1] if self._head + 1 < n else (
                self.high_watermark)
            if following > offset:
                break
            self._batches[self._head] = b""
            self._head += 1
        if self.segments is not None:
            self.segments.drop_before(offset)
        if self._head > 1024 and self._head * 2 > n:
            self._compact()
        return offset

    def _compact(self) -> None:
        h = self._head
        self._batches = self._batches[h:]
        self._bases = self._bases[h:]
        self._ends = self._ends[h:]
        self._appended_ms = self._appended_ms[h:]
        self._max_ts = self._max_ts[h:]
        self._head = 0
