"""Magic v2 record batches: headers read with ``struct`` (never per record on the hot
path), their CRC-32C, a codec change, and the one bounded walk over records.

The batch CRC covers the attributes field onward, so the broker may rewrite
``baseOffset`` (bytes 0-7) and ``partitionLeaderEpoch`` (bytes 12-15) without
recomputing it: batches are stored exactly as the producer encoded them otherwise (unless
the topic's ``compression.type`` asks for another codec: ``with_codec``).

Records are walked only to answer ListOffsets by timestamp (``record_timestamps``), and
that walk is bounded by the bytes it is given: every record moves it forward by at least
its minimum size, whatever the counts and lengths in the batch claim.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import NamedTuple

import crc32c as _crc32c

from appliance.broker.wire.compression import Codec, compress, decompress

HEADER_SIZE = 61  # bytes up to and including recordsCount
LOG_OVERHEAD = 12  # baseOffset + batchLength, not counted in batchLength
MAGIC_AT = 16
CRC_AT = 17  # the CRC-32C (Castagnoli) field
CRC_FROM = 21  # the CRC covers the attributes field onward
# A record is at least: length, attributes, timestamp delta, offset delta, key length,
# value length, header count: seven one-byte fields.
MIN_RECORD_BYTES = 7
_HEAD = struct.Struct(">qiibIhiqqqhii")
_OFFSET_EPOCH = struct.Struct(">qii")  # baseOffset, batchLength, partitionLeaderEpoch
_LENGTH = struct.Struct(">i")
_CRC = struct.Struct(">I")
ATTR_COMPRESSION_MASK = 0x07
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20


class BatchError(ValueError):
    """A record set that is not a sequence of whole magic v2 batches."""


class BatchHeader(NamedTuple):
    start: int  # position of the batch inside the record set
    size: int  # total bytes including the 12-byte log overhead
    magic: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def codec(self) -> int:
        return self.attributes & ATTR_COMPRESSION_MASK

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)


def split_batches(records: bytes | memoryview) -> list[BatchHeader]:
    """Parse the headers of every batch in a produce record set."""
    out: list[BatchHeader] = []
    pos, end = 0, len(records)
    while pos < end:
        if end - pos < HEADER_SIZE:
            raise BatchError(f"truncated batch header at byte {pos}")
        (_, length, _, magic, _, attrs, lod, base_ts, max_ts, pid, epoch, seq,
         count) = _HEAD.unpack_from(records, pos)
        if magic != 2:
            raise BatchError(f"unsupported magic {magic}; only record batch v2 is accepted")
        size = LOG_OVERHEAD + length
        if length < HEADER_SIZE - LOG_OVERHEAD or pos + size > end:
            raise BatchError(f"batch length {length} at byte {pos} exceeds the record set")
        if count <= 0 or lod != count - 1:
            raise BatchError(f"batch at byte {pos}: {count} records but lastOffsetDelta {lod}")
        out.append(BatchHeader(pos, size, magic, attrs, lod, base_ts, max_ts, pid, epoch, seq,
                               count))
        pos += size
    return out


def with_base_offset(batch: bytes | memoryview, base_offset: int, leader_epoch: int) -> bytes:
    """A copy of ``batch`` whose baseOffset/partitionLeaderEpoch are the broker's."""
    head = _OFFSET_EPOCH.pack(base_offset, len(batch) - LOG_OVERHEAD, leader_epoch)
    return head + memoryview(batch)[16:]  # one copy of the body, not two


def read_header(batch: bytes | memoryview) -> BatchHeader:
    (_, length, _, magic, _, attrs, lod, base_ts, max_ts, pid, epoch, seq,
     count) = _HEAD.unpack_from(batch, 0)
    return BatchHeader(0, LOG_OVERHEAD + length, magic, attrs, lod, base_ts, max_ts, pid, epoch,
                       seq, count)


def base_offset_of(batch: bytes | memoryview) -> int:
    return _OFFSET_EPOCH.unpack_from(batch, 0)[0]


def crc_ok(batch: bytes | memoryview) -> bool:
    """Does the batch's CRC-32C field match its bytes (attributes onward)?"""
    view = memoryview(batch)
    return _CRC.unpack_from(view, CRC_AT)[0] == _crc32c.crc32c(view[CRC_FROM:])


def records_section(batch: bytes | memoryview, limit: int) -> bytes | memoryview:
    """The batch's records, decompressed if need be (at most ``limit`` bytes:
    ``compression.DecompressedTooLarge`` past it)."""
    h = read_header(batch)
    body = memoryview(batch)[HEADER_SIZE:h.size]
    return body if not h.codec else decompress(h.codec, body, limit)


def with_codec(batch: bytes | memoryview, codec: Codec, limit: int) -> bytes:
    """The same batch with its records in ``codec`` (a topic's ``compression.type``): the
    header kept but for the codec bits, the length and the CRC-32C."""
    h = read_header(batch)
    body = compress(codec, records_section(batch, limit))
    attrs = (h.attributes & ~ATTR_COMPRESSION_MASK) | int(codec)
    view = memoryview(batch)
    tail = bytearray(view[CRC_FROM:HEADER_SIZE])  # attributes .. recordsCount
    struct.pack_into(">h", tail, 0, attrs)
    tail += body
    head = bytearray(view[:CRC_FROM])
    _LENGTH.pack_into(head, 8, len(head) + len(tail) - LOG_OVERHEAD)
    _CRC.pack_into(head, CRC_AT, _crc32c.crc32c(tail))
    return bytes(head + tail)


class VarintTooLong(IndexError):
    """A varint with more bytes than the field allows (an IndexError, so a walk that stops
    at a record running past its section stops at this too)."""


def read_varint(buf: bytes | memoryview, pos: int, end: int,
                max_bytes: int = 5) -> tuple[int, int]:
    """The zigzag varint at ``pos`` and the position after it: Kafka's record fields are
    varints (``max_bytes`` 5) or varlongs (10). Raises IndexError if it runs to ``end``,
    VarintTooLong past ``max_bytes``."""
    raw = shift = 0
    for _ in range(max_bytes):
        if pos >= end:
            raise IndexError(pos)
        b = buf[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if not b & 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
    raise VarintTooLong(pos)


class RecordStamp(NamedTuple):
    offset_delta: int
    timestamp_delta: int


WALK_SLICE = 4096  # records walked between yields


def record_timestamps(records: bytes | memoryview, count: int
                      ) -> Iterator[RecordStamp | None]:
    """Each record's (offset delta, timestamp delta), in order, from a records section.

    At most ``count`` records, and never more than the bytes hold: a record whose length
    would end before its own fields, or run past the section, ends the walk (a batch
    claiming two billion records in 65 bytes yields nothing). Yields None every
    ``WALK_SLICE`` records, so a caller can share the event loop while it walks.
    """
    view = memoryview(records)
    end = len(view)
    pos = 0
    for i in range(min(count, end // MIN_RECORD_BYTES)):
        if i and not i % WALK_SLICE:
            yield None
        try:
            length, start = read_varint(view, pos, end)
            if length < MIN_RECORD_BYTES - 1 or start + length > end:
                return
            ts_delta, p = read_varint(view, start + 1, end)  # after the attributes byte
            off_delta, _ = read_varint(view, p, end)
        except IndexError:
            return
        yield RecordStamp(off_delta, ts_delta)
        pos = start + length


