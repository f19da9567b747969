"""Reading a segment file back: its valid record batches, and the bad bytes between them.

Segments hold batches exactly as Kafka's do: one after another, each its own frame
(``baseOffset``, ``batchLength``, ..., a CRC-32C over the rest). A batch is valid when its
length fits the file, its magic is 2, its CRC matches, its header parses, and its base
offset is not below the offset the batches before it reached. Bytes that are not a valid
batch (a write torn by a crash, a flipped bit) are a *bad region*: scanning resumes at the
next position where a valid batch starts, so one bad batch never hides the good ones after
it. The scan only reads; what to do with bad regions (quarantine them) is the caller's.

``scan`` works on any buffer (recovery maps the file); ``headers`` walks a file's batches
from a position by their lengths alone, reading a bounded chunk at a time.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from typing import NamedTuple

from appliance.broker.wire.records import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_AT,
    BatchHeader,
    crc_ok,
    read_header,
)

_BASE_AND_LENGTH = struct.Struct(">qi")
_MAGIC_V2 = b"\x02"
CHUNK_BYTES = 64 * 1024  # what ``headers`` reads at a time


class Batch(NamedTuple):
    start: int  # byte position in the file
    header: BatchHeader
    base_offset: int

    @property
    def end(self) -> int:
        return self.start + self.header.size

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.header.last_offset_delta + 1


class BadRegion(NamedTuple):
    start: int
    end: int  # exclusive

    @property
    def size(self) -> int:
        return self.end - self.start


class Scan(NamedTuple):
    batches: list[Batch]
    bad: list[BadRegion]
    next_offset: int | None  # the offset after the last valid batch (None: none yet)
    end: int  # the position after the last valid batch


def batch_at(data, pos: int, expected: int | None) -> Batch | None:
    """The valid batch starting at ``pos`` of buffer ``data``, else None. Cheap checks
    first: resync calls this at every candidate position."""
    n = len(data)
    if n - pos < HEADER_SIZE:
        return None
    base, length = _BASE_AND_LENGTH.unpack_from(data, pos)
    size = LOG_OVERHEAD + length
    if length < HEADER_SIZE - LOG_OVERHEAD or pos + size > n or data[pos + MAGIC_AT] != 2:
        return None
    if base < 0 or (expected is not None and base < expected):
        return None
    view = memoryview(data)[pos:pos + size]
    try:
        if not crc_ok(view):
            return None
        header = read_header(view)
    except (ValueError, struct.error):
        return None
    finally:
        view.release()
    # a batch compaction rebuilt holds fewer records than its offsets span
    if not 0 < header.record_count <= header.last_offset_delta + 1:
        return None
    return Batch(pos, header, base)


def _resync(data, pos: int, expected: int | None) -> Batch | None:
    """The first valid batch at or after ``pos`` (found via its magic byte)."""
    i = data.find(_MAGIC_V2, pos + MAGIC_AT)
    while i >= 0:
        found = batch_at(data, i - MAGIC_AT, expected)
        if found is not None:
            return found
        i = data.find(_MAGIC_V2, i + 1)
    return None


def scan(data, start: int = 0, expected: int | None = None) -> Scan:
    """Every valid batch of ``data`` from ``start``, and the bad regions between them.

    ``expected`` is the offset the log had reached before ``start``: a batch below it is
    stale or damaged (offsets only grow), so it counts as bad bytes.
    """
    batches: list[Batch] = []
    bad: list[BadRegion] = []
    pos, end = start, start
    n = len(data)
    while pos < n:
        found = batch_at(data, pos, expected)
        if found is None:
            found = _resync(data, pos + 1, expected)
            bad.append(BadRegion(pos, found.start if found is not None else n))
            if found is None:
                break
        batches.append(found)
        expected = found.next_offset
        pos = end = found.end
    return Scan(batches, bad, expected, end)


def headers(fd: int, start: int, end: int, skip: tuple[BadRegion, ...] = ()
            ) -> Iterator[Batch]:
    """The batches of file ``fd`` from ``start`` (a batch boundary) to ``end``, by their
    lengths (headers only: no CRC check), reading at most a chunk at a time, jumping over
    the ``skip`` regions (bad bytes recovery left in place). Stops at the first header
    that does not parse or runs past ``end``."""
    pos = start
    chunk, chunk_at = b"", start
    while pos + HEADER_SIZE <= end:
        for region in skip:
            if region.start <= pos < region.end:
                pos = region.end
        if pos + HEADER_SIZE > end:
            return
        if pos + HEADER_SIZE > chunk_at + len(chunk):
            chunk_at = pos
            chunk = os.pread(fd, min(CHUNK_BYTES, end - pos), pos)
            if len(chunk) < HEADER_SIZE:
                return
        try:
            h = read_header(memoryview(chunk)[pos - chunk_at:])
        except struct.error:
            return
        if h.magic != 2 or h.size < HEADER_SIZE or pos + h.size > end:
            return
        base = _BASE_AND_LENGTH.unpack_from(chunk, pos - chunk_at)[0]
        yield Batch(pos, h, base)
        pos += h.size
