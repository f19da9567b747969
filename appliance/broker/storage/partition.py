"""One partition's log: offsets, idempotent producers, waiting fetches, and its store.

The store holds the batches: segment files with ``--data-dir`` (``segments``: memory does
not grow with the data; reads come from the files, through the page cache), else memory
(``memory_log``, bounded by the broker's log budget). Batches are kept as received (only
baseOffset/leader epoch rewritten, or the codec when the topic's ``compression.type``
asks). The high watermark is the next offset to assign, exact after every append since
this is a single replica; the log start moves as Kafka's does (retention, the budget,
DeleteRecords) and a read below it is OFFSET_OUT_OF_RANGE. Fetches that wait for data
register a waiter here and are woken by ``append``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, NamedTuple, Protocol

from appliance.broker.settings import Flush
from appliance.broker.storage.durable_io import StorageError
from appliance.broker.storage.log_budget import LogBudget
from appliance.broker.storage.memory_log import BATCH_OVERHEAD, MemoryLog, StoredBatch
from appliance.broker.storage.partition_txns import FILE_NAME as TXN_STATE
from appliance.broker.storage.partition_txns import AbortedTxn, PartitionTxns
from appliance.broker.storage.producer_state import (
    ActiveProducer,
    ProducerStates,
    last_sequence,
)
from appliance.broker.storage.segments import PartitionSegments
from appliance.broker.wire import errors
from appliance.broker.wire.control_batch import (
    COORDINATOR_EPOCH,
    Marker,
    marker_batch,
    marker_of,
)
from appliance.broker.wire.records import BatchHeader, read_header, with_base_offset
from appliance.logs import get_logger

if TYPE_CHECKING:
    from appliance.broker.storage.segment_file import FileRange

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
    def __init__(self, topic: str, index: int, store: MemoryLog | PartitionSegments,
                 budget: LogBudget, producers: ProducerStates | None = None) -> None:
        self.topic = topic
        self.index = index
        self.store = store
        self.budget = budget
        self.log_start_offset = 0
        self.high_watermark = 0
        self.producers = producers if producers is not None else ProducerStates()
        self.waiters: set[Waiter] = set()
        self._refused = 0  # produces refused by the disk since the last append that worked
        self.txns = PartitionTxns()
        if isinstance(store, PartitionSegments):
            sync = store.flush is not Flush.WRITE
            try:
                self.txns = PartitionTxns.load(store.dir, sync)
            except ValueError as exc:  # open transactions are ended by the coordinator
                log.warning("broker.txn_state_unreadable", topic=topic, partition=index,
                            error=str(exc))
                self.txns = PartitionTxns(store.dir / TXN_STATE, sync)

    @property
    def last_stable_offset(self) -> int:
        """Where ``read_committed`` consumers stop: the oldest open transaction's start."""
        return self.txns.last_stable_offset(self.high_watermark)

    @property
    def durable(self) -> bool:
        return isinstance(self.store, PartitionSegments)

    @property
    def segments(self) -> PartitionSegments | None:
        return self.store if isinstance(self.store, PartitionSegments) else None

    # -- write path ---------------------------------------------------------------------

    def append(self, batches: list[bytes | memoryview], headers: list[BatchHeader],
               now_ms: int) -> Appended:
        """Append validated batches (``batches[i]`` is ``headers[i]``'s bytes), all of them
        or none: a batch refused (sequence, epoch) or a failed disk write leaves the log
        and producer state as they were."""
        first_base = -1
        base = self.high_watermark
        new: list[StoredBatch] = []
        pids = {h.producer_id for h in headers if h.producer_id >= 0}
        undo = self.producers.snapshot(pids) if pids else None
        for data, h in zip(batches, headers, strict=True):
            if h.producer_id >= 0:
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
                                      last_seq, base, now_ms)
            if h.is_transactional and h.producer_id not in self.txns.open:
                try:
                    self.txns.begin(h.producer_id, base)
                except StorageError as exc:
                    if undo:
                        self.producers.restore(undo)
                    return Appended(errors.KAFKA_STORAGE_ERROR, -1, str(exc))
            new.append(StoredBatch(with_base_offset(data, base, LEADER_EPOCH), base,
                                   h.last_offset_delta, h.max_timestamp))
            if first_base < 0:
                first_base = base
            base += h.last_offset_delta + 1
        if not new:
            return Appended(errors.NONE, first_base)
        stored = self._store(new, now_ms)
        if stored is not None:
            if undo:
                self.producers.restore(undo)
            return stored
        return Appended(errors.NONE, first_base)

    def append_marker(self, producer_id: int, producer_epoch: int, committed: bool,
                      now_ms: int) -> Appended:
        """End the producer's transaction here with a commit or abort marker (only if
        one is open: a marker for nothing would mark nothing). The marker's epoch fences
        any older epoch of the producer."""
        if producer_id not in self.txns.open:
            return Appended(errors.NONE, -1)
        data = marker_batch(Marker.COMMIT if committed else Marker.ABORT, producer_id,
                            producer_epoch, COORDINATOR_EPOCH, now_ms)
        base = self.high_watermark
        h = read_header(data)
        failed = self._store([StoredBatch(with_base_offset(data, base, LEADER_EPOCH), base,
                                          0, h.max_timestamp)], now_ms)
        if failed is not None:
            return failed
        self.producers.fence(producer_id, producer_epoch, now_ms, COORDINATOR_EPOCH)
        self.txns.end(producer_id, base, committed)
        return Appended(errors.NONE, base)

    def reconcile_open(self, producer_id: int, now_ms: int) -> str:
        """End a transaction this partition holds open that no coordinator does: by the
        producer's marker if the log has one after its start (the file missed it), else
        with an abort marker now. What was done: "committed", "aborted" or "abort
        written"."""
        first = self.txns.open[producer_id]
        segs = self.segments
        if segs is not None:
            for seg, b in segs.batches_after(first):
                if b.header.is_control and b.header.producer_id == producer_id:
                    committed = marker_of(seg.read_batch(b)) is Marker.COMMIT
                    self.txns.end(producer_id, b.base_offset, committed)
                    return "committed" if committed else "aborted"
        epoch = self.producers.epoch_of(producer_id)
        self.append_marker(producer_id, epoch if epoch is not None else 0, False, now_ms)
        return "abort written"

    def _store(self, new: list[StoredBatch], now_ms: int) -> Appended | None:
        """Write the batches and wake waiting fetches; an Appended only on failure."""
        store = self.store
        if isinstance(store, PartitionSegments):  # disk first: never serve the unwritten
            before = store.size
            try:
                store.append(new, now_ms, self.producers.to_json)
            except StorageError as exc:
                store.stats.append_failed(exc)
                if not self._refused:  # once per outage, not once per retried produce
                    log.warning("broker.append_failed", topic=self.topic,
                                partition=self.index, error=str(exc), errno=exc.errno_name)
                self._refused += 1
                return Appended(errors.KAFKA_STORAGE_ERROR, -1, str(exc))
            if self._refused:
                log.info("broker.append_recovered", topic=self.topic, partition=self.index,
                         refused_produces=self._refused)
                self._refused = 0
            self.budget.add(store.size - before)
        else:
            self.budget.add(store.append(new, now_ms))
        appended = sum(len(b.data) for b in new)
        self.high_watermark = new[-1].base_offset + new[-1].last_offset_delta + 1
        if self.waiters:
            for w in list(self.waiters):
                w.notify(appended)
        return None

    # -- read path ----------------------------------------------------------------------

    def read(self, offset: int, max_bytes: int, at_least_one: bool, committed: bool = False
             ) -> tuple[int, list[bytes | FileRange], int]:
        """(error_code, the record bytes from the batch holding ``offset``, their count);
        ``committed`` (``read_committed``): only batches below the last stable offset."""
        if offset < self.log_start_offset or offset > self.high_watermark:
            return errors.OFFSET_OUT_OF_RANGE, [], 0
        end = self.last_stable_offset if committed else self.high_watermark
        if offset >= end:
            return errors.NONE, [], 0
        if end < self.high_watermark:
            below = self.store.bytes_below(offset, end)
            if below <= 0:
                return errors.NONE, [], 0
            max_bytes = min(max_bytes, below)
        parts: list[bytes | FileRange]
        parts, n = self.store.read(offset, max_bytes, at_least_one)  # type: ignore[assignment]
        return errors.NONE, parts, n

    def active_producers(self) -> list[tuple[ActiveProducer, int]]:
        """Every producer this partition remembers, with the first offset of its
        transaction open here (-1: none): what DescribeProducers reports."""
        return [(p, self.txns.open.get(p.producer_id, -1)) for p in self.producers.active()]

    def aborted_between(self, start: int, end: int) -> list[AbortedTxn]:
        return self.txns.aborted_between(start, end)

    def batches_from_timestamp(self, timestamp: int) -> Iterator[bytes]:
        return self.store.batches_from_timestamp(timestamp)

    def max_timestamp(self) -> int:
        """The largest batch maxTimestamp still stored (-1: none)."""
        return self.store.max_timestamp()

    def size_bytes(self) -> int:
        store = self.store
        return store.size if isinstance(store, PartitionSegments) else store.size_bytes()

    def budget_bytes(self) -> int:
        """What the partition counts against the log budget (memory: with overhead)."""
        store = self.store
        return store.size if isinstance(store, PartitionSegments) else store.memory_bytes()

    # -- retention ----------------------------------------------------------------------

    def oldest_append_ms(self) -> int | None:
        return self.store.oldest_append_ms()

    def _moved(self, freed: int) -> None:
        """Batches went from the head: the log start follows, the budget gets them back."""
        self.budget.sub(freed)
        first = self.store.first_offset()
        if first > self.log_start_offset:
            self.log_start_offset = min(first, self.high_watermark)
            self.txns.forget_below(self.log_start_offset)

    def enforce_retention(self, now_ms: int, retention_bytes: int | None,
                          retention_ms: int | None) -> int:
        """Kafka's retention (whole segments on disk, whole batches in memory); forgets
        idle producers too. Returns the bytes freed."""
        self.producers.expire(now_ms)
        store = self.store
        if isinstance(store, PartitionSegments):
            freed = store.expire(now_ms, retention_ms, retention_bytes)
        else:
            freed = store.drop_head(
                older_than_ms=now_ms - retention_ms if retention_ms is not None else None,
                over_bytes=retention_bytes)
        if freed:
            self._moved(freed)
        return freed

    def oldest_end(self) -> int | None:
        """The offset after the oldest unit the budget would evict (on disk a segment, in
        memory a batch); None: nothing stored."""
        return self.store.oldest_end()

    def append_cost(self, batches: list[bytes | memoryview]) -> int:
        """What appending these batches adds to the log budget (about)."""
        n = sum(len(b) for b in batches)
        return n if isinstance(self.store, PartitionSegments) else (
            n + len(batches) * BATCH_OVERHEAD)

    def evict(self, nbytes: int, below: int | None = None) -> int:
        """The log budget: free about ``nbytes`` of the oldest data (on disk a whole
        segment), never data at or past ``below``. Returns what was freed."""
        store = self.store
        freed = (store.evict_oldest(below) if isinstance(store, PartitionSegments)
                 else store.drop_head(free_bytes=nbytes, below=below))
        if freed:
            self._moved(freed)
        return freed

    def compacted(self, freed: int) -> None:
        """The log cleaner removed ``freed`` bytes of superseded records (offsets and the
        log start stay)."""
        self.budget.sub(freed)

    def delete_records(self, offset: int) -> int:
        """DeleteRecords: records below ``offset`` are gone; returns the new log start.

        The log start may fall inside a batch: that batch stays (batches are never cut)
        but nothing below the log start is served again. Whole batches below it go.
        """
        if offset <= self.log_start_offset:
            return self.log_start_offset
        self.log_start_offset = offset
        store = self.store
        if isinstance(store, PartitionSegments):
            before = store.size
            store.delete_below(offset)
            self.budget.sub(before - store.size)
        else:
            self.budget.sub(store.drop_head(keep_from=offset))
        return offset

    # -- recovery -----------------------------------------------------------------------

    def recovered(self, next_offset: int, first_offset: int, log_start: int) -> None:
        """Offsets after recovery: everything below the checkpointed log start stays
        expired (it may lie inside a batch: DeleteRecords moves it to any offset)."""
        self.high_watermark = next_offset
        self.log_start_offset = min(max(first_offset, log_start), next_offset)
