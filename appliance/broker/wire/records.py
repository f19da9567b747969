"""Magic v2 record batch headers, read with ``struct`` only (never per record).

The batch CRC covers the attributes field onward, so the broker may rewrite
``baseOffset`` (bytes 0-7) and ``partitionLeaderEpoch`` (bytes 12-15) without
recomputing it: batches are stored exactly as the producer encoded them otherwise.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

HEADER_SIZE = 61  # bytes up to and including recordsCount
LOG_OVERHEAD = 12  # baseOffset + batchLength, not counted in batchLength
_HEAD = struct.Struct(">qiibIhiqqqhii")
_OFFSET_EPOCH = struct.Struct(">qii")  # baseOffset, batchLength, partitionLeaderEpoch
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


def base_offset_of(batch: bytes) -> int:
    return _OFFSET_EPOCH.unpack_from(batch, 0)[0]


def _zigzag_varint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    shift = raw = 0
    while True:
        b = buf[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if not b & 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7


_XERIAL_MAGIC = b"\x82SNAPPY\x00"


def decompress(codec: int, data: bytes) -> bytes:
    """Records section of a compressed batch (codec from the attributes' low 3 bits)."""
    import cramjam  # imported lazily: only ListOffsets-by-timestamp needs it

    if codec == 1:
        return bytes(cramjam.gzip.decompress(data))
    if codec == 2:
        if data.startswith(_XERIAL_MAGIC):  # Java's framing: 16-byte header, sized blocks
            out, pos = [], 16
            while pos < len(data):
                n = struct.unpack_from(">i", data, pos)[0]
                out.append(bytes(cramjam.snappy.decompress_raw(data[pos + 4:pos + 4 + n])))
                pos += 4 + n
            return b"".join(out)
        return bytes(cramjam.snappy.decompress_raw(data))
    if codec == 3:
        return bytes(cramjam.lz4.decompress(data))
    if codec == 4:
        return bytes(cramjam.zstd.decompress(data))
    raise BatchError(f"unknown compression codec {codec}")


def first_offset_at_or_after(batch: bytes, timestamp: int) -> tuple[int, int] | None:
    """(offset, timestamp) of the first record with timestamp >= ``timestamp``.

    Walks one batch's records (decompressing if needed): used by ListOffsets-by-timestamp
    on the single batch the time index points at, never on the produce/fetch path.
    """
    h = read_header(batch)
    base = base_offset_of(batch)
    if h.max_timestamp < timestamp:
        return None
    body: bytes | memoryview = batch
    pos = HEADER_SIZE
    codec = h.attributes & ATTR_COMPRESSION_MASK
    if codec:
        try:
            body, pos = decompress(codec, bytes(batch[HEADER_SIZE:])), 0
        except Exception:  # undecodable: answer at batch granularity rather than fail
            return base, h.max_timestamp
    for _ in range(h.record_count):
        length, start = _zigzag_varint(body, pos)
        ts_delta, p = _zigzag_varint(body, start + 1)  # skip the attributes byte
        off_delta, _ = _zigzag_varint(body, p)
        if h.base_timestamp + ts_delta >= timestamp:
            return base + off_delta, h.base_timestamp + ts_delta
        pos = start + length
    return None
