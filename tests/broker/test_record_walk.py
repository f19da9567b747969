"""The one walk over records (ListOffsets by timestamp) is bounded by the bytes it is
given, whatever the batch claims: it cannot go backwards, nor past the end. It and the
compaction walk read varints with one decoder (``wire.records.read_varint``)."""

from __future__ import annotations

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from appliance.broker.storage import compact_batch
from appliance.broker.storage.compact_batch import CompactionError
from appliance.broker.wire.records import (
    HEADER_SIZE,
    WALK_SLICE,
    RecordStamp,
    VarintTooLong,
    read_varint,
    record_timestamps,
)


def _records(count: int) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                  producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                  batch_size=1 << 30)
    for i in range(count):
        b.append(i, timestamp=1000 + 10 * i, key=None, value=b"v", headers=[])
    return bytes(b.build())[HEADER_SIZE:]


def test_every_record_of_a_real_batch_in_order():
    stamps = [s for s in record_timestamps(_records(5), 5) if s is not None]
    assert stamps == [RecordStamp(i, 10 * i) for i in range(5)]


def test_a_count_larger_than_the_bytes_stops_at_the_bytes():
    body = _records(3)
    assert len([s for s in record_timestamps(body, 2**31 - 1) if s is not None]) == 3


def test_a_negative_or_overlong_length_ends_the_walk():
    backwards = b"\x01" + b"\x00" * 20  # length -1 (zigzag): would step back a byte
    assert list(record_timestamps(backwards, 2_000_000)) == []
    overlong = b"\xfe\x01" + b"\x00" * 10  # length 127 in 12 bytes
    assert list(record_timestamps(overlong, 10)) == []
    endless = b"\xff" * 40  # a varint that never ends
    assert list(record_timestamps(endless, 10)) == []


def test_the_walk_pauses_every_slice():
    count = WALK_SLICE * 2 + 5
    steps = list(record_timestamps(_records(count), count))
    assert steps.count(None) == 2 and len(steps) == count + 2


def test_the_one_varint_decoder_reads_zigzag_and_stops_at_its_bounds():
    assert read_varint(b"\x00", 0, 1) == (0, 1)
    assert read_varint(b"\x01", 0, 1) == (-1, 1)
    assert read_varint(b"\xac\x02", 0, 2) == (150, 2)  # zigzag 300
    with pytest.raises(IndexError):
        read_varint(b"\x80\x80", 0, 2)  # runs to the end
    with pytest.raises(VarintTooLong):
        read_varint(b"\xff" * 6 + b"\x00", 0, 7)  # six bytes: more than a varint's five
    assert read_varint(b"\xff" * 6 + b"\x00", 0, 7, max_bytes=10)[1] == 7  # a varlong's


def test_compaction_walks_with_the_same_decoder_and_names_its_failures():
    with pytest.raises(CompactionError, match="record runs past its batch"):
        compact_batch.records(b"\x80", 1)
    with pytest.raises(CompactionError, match="varint too long"):
        compact_batch.records(b"\xff" * 8, 1)
