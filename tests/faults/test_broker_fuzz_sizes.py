"""The broker fuzzed with hostile sizes and counts (the companion of test_broker_fuzz.py,
which fuzzes values): every API's arrays claiming billions of items or just over the item
cap, frames announcing each API's limit and beyond, batches claiming more records than
their bytes, decompression bombs in every codec, duplicate-partition and unread pipelined
fetches, a dribbled 64 MiB produce on several connections at once, a ListOffsets walking
thousands of partitions, oversized group metadata, hundreds of idle connections.

Each case runs while a bystander client measures its own request latency, and each has a
budget: the bystander's worst latency (the target is 50 ms; the bound here is generous for
a slow CI machine) and the broker's memory growth. The measured figures are printed, one
line per case; docs/broker.md quotes a quiet machine's. The file runs in the exclusive part
of `make test`, alone: beside the other worker's tests the bystander measured the machine,
not the broker."""

from __future__ import annotations

import socket
import struct
import time

import cramjam
import pytest

from appliance.broker import EmbeddedBroker
from appliance.broker.wire import schemas
from appliance.broker.wire.client import WireClient, encode_request
from appliance.broker.wire.codec import Array, Struct
from appliance.broker.wire.request_limits import DEFAULT_FRAME_BYTES, MAX_ITEMS

from support.faults.hostile_wire import (
    BYSTANDER_BUDGET_MS,
    Bystander,
    closed_by_peer,
    greedy_fetch_body,
    raw_batch,
    rss_bytes,
)
from support.wire_helpers import batch, produce

MIB = 1 << 20
MEMORY_BUDGET_MIB = 64.0
RESULTS: list[str] = []

pytestmark = pytest.mark.exclusive


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    d = tmp_path_factory.mktemp("fuzz-sizes")
    b = EmbeddedBroker(log_path=d / "broker.log", topics={"data": 1, "bombs": 1},
                       extra_args=["--group-initial-rebalance-delay-ms", "0"]).start()
    with WireClient(b.bootstrap, timeout=60) as c:
        for _ in range(8):  # 8 MiB for the fetch cases
            produce(c, "data", 0, batch([b"d" * (64 * 1024)] * 15))
    yield b
    b.stop()
    print("\n" + "\n".join(RESULTS))


def _address(b: EmbeddedBroker) -> tuple[str, int]:
    host, port = b.bootstrap.rsplit(":", 1)
    return host, int(port)


def _send_and_wait_close(b: EmbeddedBroker, data: bytes, wait: float = 10.0) -> bool:
    with socket.create_connection(_address(b), timeout=10) as sock:
        try:
            sock.sendall(data)
        except OSError:
            return True
        return closed_by_peer(sock, wait)


def _first_array_path(fields) -> list[str] | None:
    for f in fields:
        if isinstance(f.type, Array):
            return [f.name]
        if isinstance(f.type, Struct):
            inner = _first_array_path(f.type.fields)
            if inner:
                return [f.name, *inner]
    return None


def _with_items(schema, version: int, count: int) -> bytes:
    """A request of ``schema`` whose first array holds ``count`` minimal items."""
    fields = schema.request
    first = next(f for f in fields if isinstance(f.type, Array) and f.present(version))
    item = first.type.item
    body: dict = {}
    if isinstance(item, str):
        body[first.name] = [0 if item.startswith("int") else "" for _ in range(count)]
    else:
        body[first.name] = [{} for _ in range(count)]
    return encode_request(schema, version, body, 1, "fuzz-sizes")


_ZEROS = {"int8": 1, "int16": 2, "int32": 4, "int64": 8, "uint32": 4, "bool": 1, "uuid": 16}


def _huge_count_frame(schema, version: int) -> bytes:
    """Header, the fields before the first array at their smallest, then the array's
    length claiming 2^31-1 items, and no items."""
    flexible = schema.flexible(version)
    out = bytearray(struct.pack(">hhih", schema.key, version, 1, 4) + b"fuzz")
    if flexible:
        out += b"\0"
    for f in schema.request:
        if not f.present(version):
            continue
        if isinstance(f.type, Array):
            break
        if isinstance(f.type, Struct):
            return b""  # a struct before the first array: not this case's shape
        if f.type in _ZEROS:
            out += b"\0" * _ZEROS[f.type]
        else:  # strings, bytes: empty
            out += b"\x01" if flexible else (b"\0\0" if "string" in f.type else b"\0" * 4)
    else:
        return b""  # no array in this version
    out += b"\xff\xff\xff\xff\x07" if flexible else struct.pack(">i", 2**31 - 1)
    out += b"\0" * 16
    return struct.pack(">i", len(out)) + bytes(out)


def _cases():
    wide = [s for s in schemas.BY_KEY.values()
            if s.key not in (schemas.SASL_HANDSHAKE.key, schemas.SASL_AUTHENTICATE.key)
            and any(isinstance(f.type, Array) for f in s.request)]

    def huge_counts(b):
        for s in wide:
            for v in (s.min_version, s.max_version):
                frame = _huge_count_frame(s, v)
                if frame:
                    assert _send_and_wait_close(b, frame), (s.name, v)

    def over_item_cap(b):
        for s in wide:
            v = s.max_version
            if any(isinstance(f.type, Array) and f.present(v) for f in s.request):
                assert _send_and_wait_close(b, _with_items(s, v, MAX_ITEMS + 1)), s.name

    def frames_at_limits(b):
        for key in (schemas.METADATA.key, schemas.FETCH.key, schemas.OFFSET_COMMIT.key):
            head = struct.pack(">ihhih", DEFAULT_FRAME_BYTES + 1, key, 1, 1, -1)
            assert _send_and_wait_close(b, head + b"\0" * 4096), key
        assert _send_and_wait_close(b, struct.pack(">ihhih", 2**31 - 1, 0, 8, 1, -1))

    def claimed_records(b):
        with WireClient(b.bootstrap) as c:
            for count in (2, 1000, 2**31 - 1):
                assert produce(c, "bombs", 0, raw_batch(b"\x0e" + b"\0" * 6, count))[
                    "error_code"] == 2

    def bombs(b):
        zeros = b"\0" * (64 * MIB)  # 4 times the cap; each compresses under 1 MiB
        with WireClient(b.bootstrap, timeout=60) as c:
            for codec, make in ((1, cramjam.gzip.compress), (3, cramjam.lz4.compress),
                                (4, cramjam.zstd.compress)):
                bomb = bytes(make(zeros))
                assert produce(c, "bombs", 0, raw_batch(bomb, 1, attributes=codec))[
                    "error_code"] == 0, codec
            c.request(schemas.LIST_OFFSETS, 5, {
                "replica_id": -1, "isolation_level": 0, "topics": [{
                    "name": "bombs", "partitions": [{
                        "partition_index": 0, "current_leader_epoch": -1,
                        "timestamp": 0}]}]})

    def duplicate_fetch(b):
        with WireClient(b.bootstrap, timeout=60) as c:
            body = greedy_fetch_body("data", copies=MAX_ITEMS - 10)
            c.send_raw(c.encode(schemas.FETCH, 11, body))
            assert len(c.recv_frame()) < 10 * MIB

    def unread_pipeline(b):
        with socket.create_connection(_address(b), timeout=10) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            body = greedy_fetch_body("data", copies=50)
            frames = b"".join(encode_request(schemas.FETCH, 11, body, i, "fuzz")
                              for i in range(50))
            sock.sendall(frames)
            time.sleep(2)

    def dribbled_produce(b):
        socks = []
        try:
            for _ in range(4):
                s = socket.create_connection(_address(b), timeout=10)
                s.sendall(struct.pack(">ihhih", 64 * MIB, 0, 8, 1, -1))
                socks.append(s)
            for _ in range(64):  # 4 MiB each, 64 KiB at a time
                for s in socks:
                    s.sendall(b"\0" * 65536)
        finally:
            for s in socks:
                s.close()

    def many_partition_list_offsets(b):
        b.create_topics({"wide": 1000})
        with WireClient(b.bootstrap, timeout=60) as c:
            resp = c.request(schemas.LIST_OFFSETS, 5, {
                "replica_id": -1, "isolation_level": 0, "topics": [{
                    "name": "wide", "partitions": [{
                        "partition_index": i, "current_leader_epoch": -1, "timestamp": 0}
                        for i in range(1000)]}] * 9})
            assert len(resp["topics"]) == 9

    def fat_group_metadata(b):
        def join(metadata_bytes: int) -> bytes:
            return encode_request(schemas.JOIN_GROUP, 3, {
                "group_id": "fat", "session_timeout_ms": 10000,
                "rebalance_timeout_ms": 10000, "member_id": "", "group_instance_id": None,
                "protocol_type": "consumer",
                "protocols": [{"name": "range", "metadata": b"m" * metadata_bytes}]},
                1, "fuzz")
        with WireClient(b.bootstrap, timeout=30) as c:  # over the group's metadata cap
            c.send_raw(join(1_048_600))
            _, resp = c.decode_response(schemas.JOIN_GROUP, 3, c.recv_frame())
            assert resp["error_code"] == -1  # UNKNOWN_SERVER_ERROR, as Kafka
        assert _send_and_wait_close(b, join(2 * MIB))  # over JoinGroup's frame limit

    def idle_crowd(b):
        socks = [socket.create_connection(_address(b), timeout=10) for _ in range(300)]
        time.sleep(1)
        for s in socks:
            s.close()

    return {"huge array counts": huge_counts, "arrays over the item cap": over_item_cap,
            "frames over their API's limit": frames_at_limits,
            "batches claiming more records than bytes": claimed_records,
            "decompression bombs (gzip, lz4, zstd)": bombs,
            "fetch of one partition 9,990 times": duplicate_fetch,
            "50 pipelined fetches never read": unread_pipeline,
            "4 x 64 MiB produce frames dribbled": dribbled_produce,
            "ListOffsets by time over 9,000 partitions": many_partition_list_offsets,
            "1 and 2 MiB of group metadata": fat_group_metadata,
            "300 idle connections": idle_crowd}


CASES = _cases()


@pytest.mark.parametrize("name", list(CASES))
def test_hostile_sizes_and_counts_stay_within_budget(target, name):
    before = rss_bytes(target.proc.pid)
    with Bystander(target.bootstrap) as bystander:
        started = time.monotonic()
        CASES[name](target)
        took = time.monotonic() - started
    grown = (rss_bytes(target.proc.pid) - before) / MIB
    RESULTS.append(f"{name:45s} {took:6.1f} s  RSS {grown:+7.1f} MiB  {bystander.summary()}")
    print(f"\n{RESULTS[-1]}")
    assert target.is_running()
    assert bystander.failure is None, bystander.failure
    assert bystander.worst_ms < BYSTANDER_BUDGET_MS, bystander.summary()
    assert grown < MEMORY_BUDGET_MIB
