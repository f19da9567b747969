"""Transaction markers: the control batches a broker writes when a transaction ends.

A marker is a magic v2 batch with the control and transactional attribute bits, the
producer's id and epoch, no sequence (-1), and one record whose key says what it marks
(key version 0, type 0 abort or 1 commit) and whose value carries the coordinator epoch
(value version 0). Consumers never see it as a record: they use it to end the
producer's transaction (``read_committed`` drops an aborted one's records up to it).
"""

from __future__ import annotations

import struct
from enum import IntEnum

import crc32c as _crc32c

from appliance.broker.wire.records import (
    ATTR_CONTROL,
    ATTR_TRANSACTIONAL,
    CRC_AT,
    CRC_FROM,
    HEADER_SIZE,
    LOG_OVERHEAD,
)

_TAIL = struct.Struct(">hiqqqhii")  # attributes .. recordsCount
_CONTROL_KEY = struct.Struct(">hh")  # version, type
_CONTROL_VALUE = struct.Struct(">hi")  # version, coordinator epoch
NO_SEQUENCE = -1
# The coordinator epoch every marker carries: one broker coordinates every transactional
# id and its coordinator never moves, so its epoch never changes.
COORDINATOR_EPOCH = 0
# In a marker ``marker_batch`` wrote: record length, attributes, timestamp delta, offset
# delta and key length take one byte each before the key.
_KEY_AT = HEADER_SIZE + 5


class Marker(IntEnum):
    ABORT = 0
    COMMIT = 1


def _varint(n: int) -> bytes:
    raw = (n << 1) ^ (n >> 63)  # zigzag
    out = bytearray()
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)
    return bytes(out)


def marker_batch(marker: Marker, producer_id: int, producer_epoch: int,
                 coordinator_epoch: int, timestamp_ms: int) -> bytes:
    """The marker's bytes, base offset 0 (the partition sets it as it appends)."""
    key = _CONTROL_KEY.pack(0, int(marker))
    value = _CONTROL_VALUE.pack(0, coordinator_epoch)
    body = (b"\x00" + _varint(0) + _varint(0) + _varint(len(key)) + key
            + _varint(len(value)) + value + _varint(0))
    record = _varint(len(body)) + body
    tail = _TAIL.pack(ATTR_CONTROL | ATTR_TRANSACTIONAL, 0, timestamp_ms, timestamp_ms,
                      producer_id, producer_epoch, NO_SEQUENCE, 1) + record
    head = bytearray(CRC_FROM)
    struct.pack_into(">qiib", head, 0, 0, CRC_FROM + len(tail) - LOG_OVERHEAD, 0, 2)
    struct.pack_into(">I", head, CRC_AT, _crc32c.crc32c(tail))
    return bytes(head) + tail


def marker_of(batch: bytes) -> Marker:
    """What a marker this broker wrote marks (clients never write control batches:
    ``batch_policy`` refuses them, so every one in a log has ``marker_batch``'s layout)."""
    return Marker(_CONTROL_KEY.unpack_from(batch, _KEY_AT)[1])
