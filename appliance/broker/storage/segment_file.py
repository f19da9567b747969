"""One segment of a partition on disk: ``<base offset>.log`` and its ``.index``.

The log file holds record batches back to back, exactly as Kafka's segments do, so a
fetch is a byte range of it: small ranges are read into the response, larger ones go out
as a ``FileRange`` that the connection streams from the file a chunk at a time (the page
cache is the cache; nothing of the log is held in the broker's memory). Only the newest
segment of a partition is appended to; each keeps one descriptor open, as Kafka keeps
its segments open.

In memory a segment is a few numbers (base, size, next offset, largest timestamp, last
append time) and, while active, a ring of its last batches' positions: fetches at the
tail, the usual case, find their position there without a syscall. Anything older is
found through the sparse index file (``offset_index``) and a short forward scan.

Appends are all or nothing: a produce's batches go to the file in one ``writev``; if it
fails or writes short (disk full, I/O error), the file is cut back to its last whole
batch and the produce fails with a retriable storage error (``StorageError``).
"""

from __future__ import annotations

import bisect
import os
from array import array
from collections.abc import Iterator
from pathlib import Path

from appliance.broker.storage.batch_scan import BadRegion, Batch, headers
from appliance.broker.storage.durable_io import StorageError
from appliance.broker.storage.memory_log import StoredBatch
from appliance.broker.storage.offset_index import SUFFIX as INDEX_SUFFIX
from appliance.broker.storage.offset_index import IndexEntry, OffsetIndex

SUFFIX = ".log"
INLINE_BYTES = 64 * 1024  # reads up to this size go into the response as bytes
STREAM_CHUNK = 256 * 1024  # what a FileRange reads at a time
TAIL_RING = 64  # recent batch positions an active segment remembers


def segment_name(base: int, suffix: str = SUFFIX) -> str:
    return f"{base:020d}{suffix}"


class Segment:
    """A segment file; ``fd`` is open for reading (pread) and appending (O_APPEND)."""

    def __init__(self, directory: Path, base: int) -> None:
        self.base = base
        self.path = directory / segment_name(base)
        self.index = OffsetIndex(directory / segment_name(base, INDEX_SUFFIX))
        try:
            self.fd: int | None = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND,
                                          0o644)
        except OSError as exc:
            raise StorageError("open segment", self.path, exc) from exc
        self.size = 0  # bytes of whole batches
        self.next_offset = base  # the offset after its last batch
        self.max_ts = -1  # the largest batch maxTimestamp in it
        self.last_append_ms = 0  # broker clock of its newest batch (mtime after a restart)
        self.created_ms = 0  # broker clock of its first batch (segment.ms rolls)
        self.since_index = 0  # log bytes since the last index entry
        self._torn = False  # a failed undo left bytes past ``size``: retry first
        self.dirty = False  # written, not yet fsynced
        self._ring_bases = array("q")
        self._ring_pos = array("q")
        self.refs = 0  # FileRanges reading it
        self.deleted = False
        # bad bytes recovery found between valid batches and left in place (kept in
        # ``<base>.bad`` so later starts skip them too): reads jump over them
        self.bad: tuple[BadRegion, ...] = ()

    # -- appending --------------------------------------------------------------------------

    def open_for_append(self) -> None:
        self.index.open_for_append()

    def append(self, batches: list[StoredBatch], now_ms: int, interval_bytes: int,
               fsync: bool) -> None:
        """Write the batches at the end, all or none; index entries every
        ``interval_bytes``. With ``fsync`` the data is on stable storage on return."""
        assert self.fd is not None
        if self._torn:
            self._undo()
        pos, since, max_ts = self.size, self.since_index, self.max_ts
        entries: list[IndexEntry] = []
        ring: list[tuple[int, int]] = []
        for b in batches:
            if pos == 0 or since >= interval_bytes:
                entries.append(IndexEntry(b.base_offset, pos, max_ts))
                since = 0
            ring.append((b.base_offset, pos))
            since += len(b.data)
            pos += len(b.data)
            max_ts = max(max_ts, b.max_timestamp)
        total = pos - self.size
        try:
            written = os.writev(self.fd, [b.data for b in batches])
        except OSError as exc:
            self._undo()
            raise StorageError("write", self.path, exc) from exc
        if written != total:  # the rest would fail with ENOSPC: do not wait to find out
            self._undo()
            raise StorageError("write", self.path,
                               detail=f"short write, {written} of {total} bytes (disk full?)")
        if fsync:
            try:
                os.fdatasync(self.fd)
            except OSError as exc:
                self._undo()
                raise StorageError("fsync", self.path, exc) from exc
        else:
            self.dirty = True
        if not self.size:
            self.created_ms = now_ms
        self.size, self.since_index, self.max_ts = pos, since, max_ts
        self.next_offset = batches[-1].base_offset + batches[-1].last_offset_delta + 1
        self.last_append_ms = now_ms
        self._remember(ring)
        self.index.append(entries)

    def _remember(self, ring: list[tuple[int, int]]) -> None:
        for base, pos in ring:
            self._ring_bases.append(base)
            self._ring_pos.append(pos)
        extra = len(self._ring_bases) - TAIL_RING
        if extra > TAIL_RING:  # trim in bulk: amortised O(1)
            del self._ring_bases[:extra]
            del self._ring_pos[:extra]

    def _undo(self) -> None:
        """Cut the file back to its last whole batch."""
        assert self.fd is not None
        try:
            os.ftruncate(self.fd, self.size)
        except OSError as exc:
            self._torn = True
            raise StorageError("truncate", self.path, exc) from exc
        self._torn = False

    def set_recovered(self, size: int, next_offset: int, max_ts: int, since_index: int,
                      mtime_ms: int) -> None:
        self.size, self.next_offset, self.max_ts = size, next_offset, max_ts
        self.since_index = since_index
        self.last_append_ms = self.created_ms = mtime_ms

    # -- flushing and closing ---------------------------------------------------------------

    def sync(self) -> None:
        """fdatasync the log (and the index, if open); raises OSError."""
        if self.fd is not None and self.dirty:
            os.fdatasync(self.fd)
            self.dirty = False
        self.index.sync()

    def close_index(self) -> None:
        """The segment stopped being active: its index is only read from now on."""
        self.index.close()
        self._ring_bases = array("q")
        self._ring_pos = array("q")

    def close(self) -> None:
        self.index.close()
        if self.fd is not None and not self.refs:
            os.close(self.fd)
            self.fd = None

    def delete(self) -> None:
        """Remove the files; readers still streaming from it keep the open descriptor
        (the inode lives until they finish)."""
        self.deleted = True
        self.index.close()
        self.path.unlink(missing_ok=True)
        self.index.path.unlink(missing_ok=True)
        self.close()

    def acquire(self) -> None:
        self.refs += 1

    def release(self) -> None:
        self.refs -= 1
        if self.deleted and not self.refs:
            self.close()

    # -- reading ----------------------------------------------------------------------------

    def locate(self, offset: int) -> Batch | None:
        """The first batch whose last offset is at or past ``offset`` (None: none here)."""
        assert self.fd is not None
        bases = self._ring_bases
        if bases and offset >= bases[0]:
            i = bisect.bisect_right(bases, offset) - 1
            start = self._ring_pos[i]
        else:
            entry = self.index.floor(offset)
            start = entry.position if entry is not None else 0
            if entry is not None and not self._entry_holds(entry):
                start = 0  # an index entry that does not match the log: scan instead
        for b in headers(self.fd, start, self.size, self.bad):
            if b.next_offset > offset:
                return b
        return None

    def _entry_holds(self, entry: IndexEntry) -> bool:
        assert self.fd is not None
        head = os.pread(self.fd, 8, entry.position)
        return len(head) == 8 and int.from_bytes(head, "big", signed=True) == entry.offset

    def read(self, offset: int, max_bytes: int, at_least_one: bool
             ) -> tuple[list[bytes | FileRange], int]:
        """The bytes from the batch holding ``offset`` (or the next after it), at most
        ``max_bytes`` (the last batch may be cut, as Kafka does; the first is whole if
        ``at_least_one``). ([], 0): nothing at or after ``offset`` in this segment."""
        first = self.locate(offset)
        if first is None:
            return [], 0
        size = first.header.size
        if at_least_one:
            max_bytes = max(max_bytes, size)
        elif max_bytes < size:
            return [], 0
        start = first.start
        end = min(self.size, start + max_bytes)
        for region in self.bad:  # never send bad bytes: stop before them
            if start < region.start < end:
                end = region.start
        if end - start <= INLINE_BYTES:
            assert self.fd is not None
            return [os.pread(self.fd, end - start, start)], end - start
        return [FileRange(self, start, end)], end - start

    def batches_from(self, start: int) -> Iterator[Batch]:
        assert self.fd is not None
        return headers(self.fd, start, self.size, self.bad)

    def read_batch(self, batch: Batch) -> bytes:
        assert self.fd is not None
        return os.pread(self.fd, batch.header.size, batch.start)

    def timestamp_start(self, timestamp: int) -> int:
        """Where to scan from for the first batch whose max timestamp reaches it."""
        entry = self.index.before_timestamp(timestamp)
        if entry is None or not self._entry_holds(entry):
            return 0
        return entry.position


class FileRange:
    """Record bytes a response streams from a segment instead of holding them: the
    segment stays open (``acquire``) until the range is sent or dropped."""

    __slots__ = ("segment", "start", "end", "_pos", "_open")

    def __init__(self, segment: Segment, start: int, end: int) -> None:
        self.segment = segment
        self.start, self.end, self._pos = start, end, start
        self._open = True
        segment.acquire()

    def __len__(self) -> int:
        return self.end - self.start

    def next_chunk(self) -> bytes | None:
        """The next piece (at most ``STREAM_CHUNK``), None when all was read. A file cut
        short under it (it cannot be: segments only grow, deletion keeps the inode) would
        end the range early; the caller then closes the connection."""
        if not self._open or self._pos >= self.end or self.segment.fd is None:
            self.done()
            return None
        data = os.pread(self.segment.fd, min(STREAM_CHUNK, self.end - self._pos), self._pos)
        if not data:
            self.done()
            return None
        self._pos += len(data)
        return data

    def done(self) -> None:
        """Stop reading (sent, or the connection went away): the segment may close."""
        if self._open:
            self._open = False
            self.segment.release()
