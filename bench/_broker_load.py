"""Drive a broker with volume, read it back whole, and watch its process: what the broker
soak test (tests/broker/test_memory_bound.py) and the broker bench (``bench.broker_soak``) share.

Every record's value starts with its producer-side sequence number, which is also the
offset the broker must give it (one producer, one partition, nothing else written), so a
read from the log start to the end proves every record still stored is readable at its
offset, whatever retention has deleted before it.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from kafka.record import MemoryRecords
from kafka.record.default_records import DefaultRecordBatchBuilder

from appliance.broker.wire import errors, schemas
from appliance.broker.wire.client import WireClient

PRODUCE_V = 8
FETCH_V = 11
SEQ_BYTES = 12


def owned_partitions(parts: list[str], at: int) -> frozenset[int]:
    """The partitions of a member process's ``OWNED`` line, split into ``parts``: the
    comma list at index ``at``, absent or empty when it owns none (the group benches'
    member programs print it from their assignment callbacks)."""
    listed = parts[at].split(",") if len(parts) > at else []
    return frozenset(int(p) for p in listed if p)


def sequenced_batch(first: int, count: int, value_bytes: int) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                  producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                  batch_size=1 << 30)
    pad = b"p" * (value_bytes - SEQ_BYTES)
    now = int(time.time() * 1000)
    for i in range(count):
        b.append(i, timestamp=now, key=None, value=b"%012d" % (first + i) + pad, headers=[])
    return bytes(b.build())


def produce(c: WireClient, topic: str, records: bytes, partition: int = 0) -> int:
    """The base offset (acks=1); raises on an error."""
    resp = c.request(schemas.PRODUCE, PRODUCE_V, {
        "transactional_id": None, "acks": 1, "timeout_ms": 10000,
        "topic_data": [{"name": topic, "partition_data": [
            {"index": partition, "records": records}]}]})
    part = resp["responses"][0]["partition_responses"][0]
    if part["error_code"] != errors.NONE:
        raise AssertionError(f"produce failed: {part}")
    return part["base_offset"]


def offsets(c: WireClient, topic: str, partition: int = 0) -> tuple[int, int]:
    """(log start, log end)."""
    out = []
    for ts in (-2, -1):
        resp = c.request(schemas.LIST_OFFSETS, 5, {
            "replica_id": -1, "isolation_level": 0,
            "topics": [{"name": topic, "partitions": [{
                "partition_index": partition, "current_leader_epoch": -1,
                "timestamp": ts}]}]})
        out.append(resp["topics"][0]["partitions"][0]["offset"])
    return out[0], out[1]


@dataclass
class ReadBack:
    start: int
    end: int
    records: int
    bytes: int
    seconds: float


def read_back(bootstrap: str, topic: str, fetch_bytes: int = 8 << 20,
              partition: int = 0, timeout_s: float = 600.0) -> ReadBack:
    """Read the partition from its log start to its end; every record must be there, at
    its offset, with its sequence number. A start that moved under the read (retention
    at work) restarts the check from the new start."""
    started = time.monotonic()
    with WireClient(bootstrap, timeout=60) as c:
        start, end = offsets(c, topic, partition)
        offset, seen, nbytes = start, 0, 0
        while offset < end:
            if time.monotonic() - started > timeout_s:
                raise AssertionError(f"read back did not finish in {timeout_s} s")
            resp = c.request(schemas.FETCH, FETCH_V, {
                "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": fetch_bytes,
                "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                "topics": [{"topic": topic, "partitions": [{
                    "partition": partition, "current_leader_epoch": -1,
                    "fetch_offset": offset, "log_start_offset": -1,
                    "partition_max_bytes": fetch_bytes}]}],
                "forgotten_topics_data": [], "rack_id": ""})
            part = resp["responses"][0]["partitions"][0]
            if part["error_code"] == errors.OFFSET_OUT_OF_RANGE:  # retention moved past it
                start = offset = offsets(c, topic, partition)[0]
                continue
            assert part["error_code"] == errors.NONE, part
            records = bytes(part["records"])
            nbytes += len(records)
            moved = False
            batches = MemoryRecords(records)
            while (b := batches.next_batch()) is not None:
                for r in b:
                    if r.offset < offset:
                        continue
                    assert r.offset == offset, f"offset {offset} missing: next is {r.offset}"
                    assert int(r.value[:SEQ_BYTES]) == r.offset, r.value[:SEQ_BYTES]
                    offset += 1
                    seen += 1
                    moved = True
            assert moved, f"nothing at or after {offset} below {end}"
    return ReadBack(start, end, seen, nbytes, time.monotonic() - started)


@dataclass(frozen=True)
class ProcessMemory:
    rss: int  # bytes resident now
    peak: int  # the most ever resident (VmHWM)
    open_files: int


def process_memory(pid: int) -> ProcessMemory:
    fields = {}
    for line in open(f"/proc/{pid}/status"):
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0]) * 1024
    return ProcessMemory(fields["VmRSS"], fields["VmHWM"], len(os.listdir(f"/proc/{pid}/fd")))
