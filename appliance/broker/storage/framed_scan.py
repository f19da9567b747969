"""Reading a segment file an older broker wrote: its whole, valid frames, and the bad
bytes between them (``segments.upgrade_framed`` rewrites such files to bare batches once).

Each batch was framed on disk as ``[u32 length][u32 crc32][batch]``. A frame is valid when
its CRC matches, the batch header parses, and its base offset is not below the offset the
frames before it reached. Bytes that are not a valid frame (a write torn by a crash, a
flipped bit) are a *bad region*: scanning resumes at the next position where a valid frame
starts, so one bad frame never hides the good ones after it. The scan only reads; what to
do with bad regions (quarantine them) is the caller's decision.
"""

from __future__ import annotations

import struct
import zlib
from typing import NamedTuple

from appliance.broker.storage.batch_scan import BadRegion
from appliance.broker.wire.records import BatchError, BatchHeader, read_header

FRAME = struct.Struct(">II")  # length of the batch, crc32 of the batch
_BASE_AND_LENGTH = struct.Struct(">qi")  # the batch's baseOffset and batchLength fields
_MAGIC_AT = 16  # the batch's magic byte
_MIN_BATCH = 61  # a v2 batch header, without records
_MAGIC_V2 = b"\x02"


def frame_head(batch: bytes) -> bytes:
    return FRAME.pack(len(batch), zlib.crc32(batch))


class Frame(NamedTuple):
    start: int  # byte position of the frame in the file
    end: int  # position after it
    batch: bytes
    header: BatchHeader
    base_offset: int

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.header.last_offset_delta + 1


class SegmentScan(NamedTuple):
    frames: list[Frame]
    bad: list[BadRegion]
    next_offset: int | None  # the offset after the last valid frame (None: no frame yet)


def _frame_at(data: bytes, pos: int, expected: int | None) -> Frame | None:
    """The valid frame starting at ``pos``, else None. Cheap checks first: resync calls
    this at every candidate position."""
    n = len(data)
    if n - pos < FRAME.size + _MIN_BATCH:
        return None
    length, crc = FRAME.unpack_from(data, pos)
    start = pos + FRAME.size
    end = start + length
    if length < _MIN_BATCH or end > n:
        return None
    base, batch_length = _BASE_AND_LENGTH.unpack_from(data, start)
    if data[start + _MAGIC_AT] != 2 or batch_length != length - 12:
        return None
    if base < 0 or (expected is not None and base < expected):
        return None
    batch = data[start:end]
    if zlib.crc32(batch) != crc:
        return None
    try:
        header = read_header(batch)
    except (BatchError, struct.error):
        return None
    if header.record_count <= 0 or header.last_offset_delta != header.record_count - 1:
        return None
    return Frame(pos, end, batch, header, base)


def _resync(data: bytes, pos: int, expected: int | None) -> tuple[int, Frame | None]:
    """The first valid frame at or after ``pos`` (found via its magic byte), or (len, None)."""
    magic_offset = FRAME.size + _MAGIC_AT
    i = data.find(_MAGIC_V2, pos + magic_offset)
    while i >= 0:
        frame = _frame_at(data, i - magic_offset, expected)
        if frame is not None:
            return frame.start, frame
        i = data.find(_MAGIC_V2, i + 1)
    return len(data), None


def scan(data: bytes, expected: int | None = None) -> SegmentScan:
    """Every valid frame of one segment file's bytes, and the bad regions between them.

    ``expected`` is the offset the previous segment ended at: a frame below it is stale
    or damaged (offsets only grow), so it counts as bad bytes.
    """
    frames: list[Frame] = []
    bad: list[BadRegion] = []
    pos = 0
    while pos < len(data):
        frame = _frame_at(data, pos, expected)
        if frame is None:
            start = pos
            pos, frame = _resync(data, pos + 1, expected)
            bad.append(BadRegion(start, pos))
            if frame is None:
                break
        frames.append(frame)
        expected = frame.next_offset
        pos = frame.end
    return SegmentScan(frames, bad, expected)
