"""ListOffsets by timestamp: the first record at or after a time, found without stalling.

The partition's store points at the first batch whose running maximum timestamp reaches
the target (an index: in memory the batches' running maxima, on disk the sparse index);
from there batches are read one at a time and only those whose own maximum reaches it are
walked record by record. The walk is a ``slices`` job: it pauses every few thousand
records, a compressed batch is decompressed on the worker thread (at most
``max_decompressed_bytes``; past that, or for bytes that are not the codec's, the answer
is the batch itself, at batch granularity, as before the walk), and what the walk reads
is bounded by the batch's bytes, whatever its header claims.
"""

from __future__ import annotations

from functools import partial

from appliance.broker.slices import Job
from appliance.broker.storage.partition import PartitionLog
from appliance.broker.wire.compression import CompressionError
from appliance.broker.wire.records import (
    HEADER_SIZE,
    base_offset_of,
    read_header,
    record_timestamps,
    records_section,
)

NOT_FOUND = (-1, -1)


def first_at_or_after(partition: PartitionLog, timestamp: int, limit: int) -> Job:
    """A job whose result is (offset, timestamp) of the first record, at or after the log
    start, whose timestamp is at least ``timestamp``; (-1, -1) if there is none."""
    log_start = partition.log_start_offset
    for batch in partition.batches_from_timestamp(timestamp):
        h = read_header(batch)
        base = base_offset_of(batch)
        if h.max_timestamp < timestamp or base + h.last_offset_delta < log_start:
            continue
        if h.codec:
            try:
                records = yield partial(records_section, batch, limit)
            except CompressionError:  # too big to walk, or not the codec's bytes
                return max(base, log_start), h.max_timestamp
        else:
            records = memoryview(batch)[HEADER_SIZE:h.size]
        for stamp in record_timestamps(records, h.record_count):
            if stamp is None:
                yield None
                continue
            ts = h.base_timestamp + stamp.timestamp_delta
            offset = base + stamp.offset_delta
            if ts >= timestamp and offset >= log_start:
                return offset, ts
        yield None
    return NOT_FOUND


def max_timestamp(partition: PartitionLog, limit: int) -> Job:
    """ListOffsets' MAX_TIMESTAMP (KIP-734): the first record with the largest timestamp."""
    largest = partition.max_timestamp()
    if largest < 0:
        return NOT_FOUND
    return (yield from first_at_or_after(partition, largest, limit))
