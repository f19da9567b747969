"""A segment's sparse index file: where in the segment to start looking for an offset or a
timestamp, without holding anything of it in memory.

``<base offset>.index`` beside ``<base offset>.log``: one fixed-size entry every
``index.interval.bytes`` (Kafka's, 4096) of log: the base offset of the batch that starts
there, its byte position, and the largest timestamp of the batches before it. Offsets and
positions only grow, and so does that running maximum, so both lookups are binary
searches over the file (``pread``, a few syscalls; the page cache keeps hot indexes).
A lookup then reads the log forward from the entry it found: at most an interval, plus
one batch.

The index is a hint, never the truth: recovery checks the entries it relies on against
the log (``last_valid``) and rebuilds an index it cannot trust; an entry lost to a crash
only makes a lookup scan further.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import NamedTuple

ENTRY = struct.Struct(">qIq")  # base offset, position, max timestamp of earlier batches
SUFFIX = ".index"
DEFAULT_INTERVAL_BYTES = 4096  # Kafka's index.interval.bytes


class IndexEntry(NamedTuple):
    offset: int  # base offset of the batch starting at ``position``
    position: int
    max_ts_before: int  # largest batch maxTimestamp before ``position`` (-1: none)


def pack(entries: list[IndexEntry]) -> bytes:
    return b"".join(ENTRY.pack(*e) for e in entries)


class OffsetIndex:
    """The index file of one segment; ``fd`` stays open only while the segment is active
    (closed segments open it for a lookup and close it again)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd: int | None = None
        self.count = 0  # entries in the file (whole ones)
        self.last: IndexEntry | None = None

    def open_for_append(self) -> None:
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        size = os.fstat(self.fd).st_size
        if size % ENTRY.size:  # a torn entry: cut it (entries are hints)
            os.ftruncate(self.fd, size - size % ENTRY.size)
        self.count = size // ENTRY.size
        self.last = self._read(self.fd, self.count - 1) if self.count else None

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def sync(self) -> None:
        if self.fd is not None:
            os.fsync(self.fd)

    # -- writing ----------------------------------------------------------------------------

    def append(self, entries: list[IndexEntry]) -> None:
        """Add entries (the index fd must be open); a failed write is cut back and
        forgotten: the log is what counts."""
        if not entries or self.fd is None:
            return
        data = pack(entries)
        try:
            written = os.write(self.fd, data)
        except OSError:
            written = 0
        if written != len(data):
            try:
                os.ftruncate(self.fd, self.count * ENTRY.size)
            except OSError:
                pass
            return
        self.count += len(entries)
        self.last = entries[-1]

    def truncate_to(self, count: int) -> None:
        """Keep the first ``count`` entries (recovery cut the log before the rest)."""
        assert self.fd is not None
        os.ftruncate(self.fd, count * ENTRY.size)
        self.count = count
        self.last = self._read(self.fd, count - 1) if count else None

    def rewrite(self, entries: list[IndexEntry]) -> None:
        """Replace the whole file (recovery rebuilt it from the log)."""
        assert self.fd is not None
        os.ftruncate(self.fd, 0)
        self.count = 0
        self.last = None
        self.append(entries)

    # -- reading ----------------------------------------------------------------------------

    @staticmethod
    def _read(fd: int, i: int) -> IndexEntry:
        return IndexEntry(*ENTRY.unpack(os.pread(fd, ENTRY.size, i * ENTRY.size)))

    def _with_fd(self):
        if self.fd is not None:
            return self.fd, False
        try:
            return os.open(self.path, os.O_RDONLY), True
        except FileNotFoundError:
            return None, False

    def floor(self, offset: int) -> IndexEntry | None:
        """The last entry whose batch starts at or below ``offset``."""
        fd, opened = self._with_fd()
        if fd is None:
            return None
        try:
            n = os.fstat(fd).st_size // ENTRY.size if opened else self.count
            lo, hi, found = 0, n - 1, None
            while lo <= hi:
                mid = (lo + hi) // 2
                e = self._read(fd, mid)
                if e.offset <= offset:
                    found, lo = e, mid + 1
                else:
                    hi = mid - 1
            return found
        finally:
            if opened:
                os.close(fd)

    def before_timestamp(self, timestamp: int) -> IndexEntry | None:
        """The entry to scan from for the first batch whose max timestamp reaches
        ``timestamp``: the one before the first entry whose earlier batches already
        reached it (None: scan from the segment's start)."""
        fd, opened = self._with_fd()
        if fd is None:
            return None
        try:
            n = os.fstat(fd).st_size // ENTRY.size if opened else self.count
            lo, hi, first = 0, n - 1, n
            while lo <= hi:
                mid = (lo + hi) // 2
                if self._read(fd, mid).max_ts_before >= timestamp:
                    first, hi = mid, mid - 1
                else:
                    lo = mid + 1
            return self._read(fd, first - 1) if first > 0 else None
        finally:
            if opened:
                os.close(fd)

    def entries(self) -> list[IndexEntry]:
        """Every entry (recovery checks them); stops at a torn one."""
        fd, opened = self._with_fd()
        if fd is None:
            return []
        try:
            data = os.pread(fd, os.fstat(fd).st_size, 0)
        finally:
            if opened:
                os.close(fd)
        return [IndexEntry(*ENTRY.unpack_from(data, i))
                for i in range(0, len(data) - len(data) % ENTRY.size, ENTRY.size)]
