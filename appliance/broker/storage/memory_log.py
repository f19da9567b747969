"""One partition's batches held in memory: the store of a broker without ``--data-dir``.

Batches are kept as received, oldest first, with per batch only what reads and retention
need in compact arrays (base offset, running byte total, running max timestamp, the
broker's clock at append): about ``BATCH_OVERHEAD`` bytes beside the batch itself. Reads
hand out the stored ``bytes`` objects (no copy). Retention drops whole batches from the
head: by a topic's ``retention.ms``/``retention.bytes`` and, across every partition, by
the broker's memory budget (``log_budget``), oldest first, as Kafka's retention would:
a reader behind the new log start gets OFFSET_OUT_OF_RANGE.
"""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Iterator
from typing import NamedTuple

# What one stored batch costs beside its bytes: the bytes object's header (33), the list
# slot (8), four 8-byte array entries (32) and the arrays' spare capacity (~1/8).
BATCH_OVERHEAD = 88


class StoredBatch(NamedTuple):
    """A batch on its way into a store: its bytes (baseOffset already the broker's)."""

    data: bytes
    base_offset: int
    last_offset_delta: int
    max_timestamp: int


class MemoryLog:
    def __init__(self) -> None:
        self._batches: list[bytes] = []
        self._bases = array("q")  # baseOffset of each batch (bisect index)
        self._ends = array("q")  # cumulative byte count after each batch
        self._max_ts = array("q")  # running max of batch maxTimestamp (monotonic)
        self._appended_ms = array("q")  # broker clock at append, for time retention
        self._head = 0  # first live batch; earlier ones were dropped
        self.next_offset = 0  # the offset after the last batch

    # -- size -----------------------------------------------------------------------------

    @property
    def batches(self) -> int:
        return len(self._batches) - self._head

    def size_bytes(self) -> int:
        """The live batches' bytes."""
        if self._head == len(self._batches):
            return 0
        h = self._head
        return self._ends[-1] - (self._ends[h] - len(self._batches[h]))

    def memory_bytes(self) -> int:
        """What the live batches cost, overhead included (what the budget counts)."""
        return self.size_bytes() + self.batches * BATCH_OVERHEAD

    def first_offset(self) -> int:
        """The base offset of the oldest live batch (``next_offset`` if none)."""
        return self._bases[self._head] if self._head < len(self._batches) else (
            self.next_offset)

    def oldest_append_ms(self) -> int | None:
        return self._appended_ms[self._head] if self._head < len(self._batches) else None

    def oldest_end(self) -> int | None:
        """The offset after the oldest live batch (what evicting it would free up to)."""
        h = self._head
        if h == len(self._batches):
            return None
        return self._bases[h + 1] if h + 1 < len(self._batches) else self.next_offset

    # -- writing ----------------------------------------------------------------------------

    def append(self, batches: list[StoredBatch], now_ms: int) -> int:
        """Store the batches; returns what they cost (bytes and overhead)."""
        cost = 0
        for b in batches:
            prev_end = self._ends[-1] if self._ends else 0
            prev_max = self._max_ts[-1] if self._max_ts else -1
            self._batches.append(b.data)
            self._bases.append(b.base_offset)
            self._ends.append(prev_end + len(b.data))
            self._max_ts.append(max(prev_max, b.max_timestamp))
            self._appended_ms.append(now_ms)
            self.next_offset = b.base_offset + b.last_offset_delta + 1
            cost += len(b.data) + BATCH_OVERHEAD
        return cost

    def reset(self, next_offset: int) -> None:
        """Empty, continuing at ``next_offset`` (recovery of nothing, or all expired)."""
        self.__init__()  # type: ignore[misc]
        self.next_offset = next_offset

    # -- reading ----------------------------------------------------------------------------

    def read(self, offset: int, max_bytes: int, at_least_one: bool) -> tuple[list[bytes], int]:
        """Whole batches from the one holding ``offset`` (or the next after it), up to
        ``max_bytes`` (the first one whatever its size, if ``at_least_one``)."""
        i = max(bisect.bisect_right(self._bases, offset, self._head) - 1, self._head)
        out: list[bytes] = []
        total = 0
        n = len(self._batches)
        if i < n and self._bases[i] + self._last_delta(i) < offset:
            i += 1  # offset falls in a gap after batch i
        while i < n:
            b = self._batches[i]
            if total + len(b) > max_bytes and (out or not at_least_one):
                break
            out.append(b)
            total += len(b)
            i += 1
        return out, total

    def bytes_below(self, offset: int, end: int) -> int:
        """The bytes of the batches from the one holding ``offset`` up to (not
        including) the one starting at ``end``."""
        i = max(bisect.bisect_right(self._bases, offset, self._head) - 1, self._head)
        j = bisect.bisect_left(self._bases, end, self._head)
        if j <= i:
            return 0
        return self._ends[j - 1] - (self._ends[i] - len(self._batches[i]))

    def _last_delta(self, i: int) -> int:
        following = self._bases[i + 1] if i + 1 < len(self._batches) else self.next_offset
        return following - self._bases[i] - 1

    def max_timestamp(self) -> int:
        """The largest batch maxTimestamp appended (a running maximum: a batch retention
        dropped may still set it, and a search for it then finds nothing, -1)."""
        return self._max_ts[-1] if self._head < len(self._batches) else -1

    def batches_from_timestamp(self, timestamp: int) -> Iterator[bytes]:
        """The batches that may hold the first record at or after ``timestamp``, in order
        (from the first whose running max timestamp reaches it)."""
        i = bisect.bisect_left(self._max_ts, timestamp, self._head)
        while i < len(self._batches):
            yield self._batches[i]
            i += 1

    # -- retention --------------------------------------------------------------------------

    def drop_head(self, keep_from: int | None = None, older_than_ms: int | None = None,
                  over_bytes: int | None = None, free_bytes: int = 0,
                  below: int | None = None) -> int:
        """Drop batches from the head while any reason holds; returns the cost freed.

        ``keep_from``: batches wholly below this offset go (DeleteRecords); ``older_than_ms``:
        batches appended before it go; ``over_bytes``: go while the log is larger;
        ``free_bytes``: go until this much cost was freed (the memory budget). ``below``:
        whatever the reason, never a batch that reaches this offset (what consumer groups
        have not read)."""
        freed = 0
        n = len(self._batches)
        while self._head < n:
            h = self._head
            following = self._bases[h + 1] if h + 1 < n else self.next_offset
            if below is not None and following > below:
                break
            reason = (
                (keep_from is not None and following <= keep_from)
                or (older_than_ms is not None and self._appended_ms[h] < older_than_ms)
                or (over_bytes is not None and self.size_bytes() > over_bytes)
                or freed < free_bytes)
            if not reason:
                break
            freed += len(self._batches[h]) + BATCH_OVERHEAD
            self._batches[h] = b""
            self._head += 1
        if self._head > 1024 and self._head * 2 > n:
            self._compact()
        return freed

    def _compact(self) -> None:
        h = self._head
        self._batches = self._batches[h:]
        self._bases = self._bases[h:]
        self._ends = self._ends[h:]
        self._max_ts = self._max_ts[h:]
        self._appended_ms = self._appended_ms[h:]
        self._head = 0
