"""Log compaction at the level of one record batch: its records' keys, and the batch
rebuilt with only some of them.

A record (magic v2) is ``length, attributes, timestampDelta, offsetDelta, key, value,
headers``, each length a zigzag varint (the timestamp delta a varlong). Records keep
their offset and timestamp deltas, so a batch rebuilt from some of its records keeps its
base offset, base and max timestamps, producer fields and lastOffsetDelta (the offset
after the batch does not move, as in Kafka: offsets are never reassigned); only the
record count, the length, the records section (recompressed in the batch's codec) and
the CRC-32C change.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

import crc32c as _crc32c

from appliance.broker.wire.compression import Codec, compress
from appliance.broker.wire.records import (
    CRC_FROM,
    HEADER_SIZE,
    LOG_OVERHEAD,
    VarintTooLong,
    read_header,
    read_varint,
    records_section,
)

_COUNT_AT = HEADER_SIZE - 4  # recordsCount, the header's last field
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_CRC_AT = 17


class CompactionError(ValueError):
    """A batch whose records cannot be walked (it is then kept whole)."""


class Record(NamedTuple):
    offset_delta: int
    key: bytes | None  # None: a record without a key (kept: nothing supersedes it)
    tombstone: bool  # a null value: the key's deletion
    start: int  # the record's bytes in the records section, length prefix included
    end: int


def _varint(buf, pos: int, end: int, max_bytes: int = 5) -> tuple[int, int]:
    """``wire.records.read_varint``, its failures as CompactionError (the batch is kept)."""
    try:
        return read_varint(buf, pos, end, max_bytes)
    except VarintTooLong:
        raise CompactionError("varint too long") from None
    except IndexError:
        raise CompactionError("record runs past its batch") from None


def records(section, count: int) -> list[Record]:
    """The records of a (decompressed) records section; CompactionError if they do not
    walk cleanly to its end."""
    view = memoryview(section)
    end = len(view)
    out: list[Record] = []
    pos = 0
    for _ in range(count):
        length, start = _varint(view, pos, end)
        stop = start + length
        if length < 6 or stop > end:
            raise CompactionError("record length out of bounds")
        p = start + 1  # attributes
        _, p = _varint(view, p, stop, 10)  # timestampDelta (varlong)
        offset_delta, p = _varint(view, p, stop)
        key_len, p = _varint(view, p, stop)
        key = None
        if key_len >= 0:
            if p + key_len > stop:
                raise CompactionError("key runs past its record")
            key = bytes(view[p:p + key_len])
            p += key_len
        value_len, p = _varint(view, p, stop)
        out.append(Record(offset_delta, key, value_len < 0, pos, stop))
        pos = stop
    if pos != end:
        raise CompactionError("bytes after the last record")
    return out


def keyless(section, count: int) -> bool:
    """Whether a records section holds a record without a key (a compacted topic refuses
    it, as Kafka does); a section that does not walk counts as keyless too."""
    try:
        return any(r.key is None for r in records(section, count))
    except CompactionError:
        return True


def batch_keyless(batch, limit: int) -> bool:
    """``keyless`` of a whole batch, decompressing at most ``limit`` bytes."""
    return keyless(records_section(batch, limit), read_header(batch).record_count)


def batch_records(batch: bytes, limit: int) -> tuple[bytes | memoryview, list[Record]]:
    """(the records section, its records) of a stored batch; decompressing at most
    ``limit`` bytes (CompressionError past it)."""
    h = read_header(batch)
    section = records_section(batch, limit)
    return section, records(section, h.record_count)


def rebuilt(batch: bytes, section, kept: list[Record]) -> bytes:
    """``batch`` with only the ``kept`` records (in order): same header but the count,
    the length and the CRC; the records recompressed in the batch's codec."""
    h = read_header(batch)
    view = memoryview(section)
    body = b"".join(view[r.start:r.end] for r in kept)
    body = compress(Codec(h.codec), body) if h.codec else body
    tail = bytearray(memoryview(batch)[CRC_FROM:HEADER_SIZE])
    _I32.pack_into(tail, _COUNT_AT - CRC_FROM, len(kept))
    tail += body
    head = bytearray(memoryview(batch)[:CRC_FROM])
    _I32.pack_into(head, 8, len(head) + len(tail) - LOG_OVERHEAD)
    _U32.pack_into(head, _CRC_AT, _crc32c.crc32c(tail))
    return bytes(head + tail)
