"""The broker fuzzed over the wire, for every API and version it knows (and some it does
not): random, truncated and oversized frames (the decoder), and well-formed requests with
random values drawn from the schema tables (the handlers: consumer groups, configs,
DeleteRecords, transactions...). After each frame the connection is either closed or still
answers a well-formed request; the broker keeps serving new clients, its memory stays
bounded, and no request, however odd, ever fails inside a handler."""

from __future__ import annotations

import socket
import struct
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from appliance.broker import EmbeddedBroker
from appliance.broker.wire import schemas
from appliance.broker.wire.client import WireClient
from appliance.broker.wire.codec import Array, Field, Struct

from support.faults.fault_knobs import LONG, knob
from support.faults.hostile_wire import rss_bytes

PAIRS = sorted((s.key, v, s.flexible(v)) for s in schemas.BY_KEY.values()
               for v in range(s.min_version, s.max_version + 1))
MAX_FRAME = 104_857_600  # the broker's default max frame (Kafka's socket.request.max.bytes)
API_VERSIONS_V0 = struct.pack(">hhih", 18, 0, 0x5EED, -1)  # corr 0x5EED, null client id


@pytest.fixture(scope="module")
def fuzz_broker(tmp_path_factory):
    b = EmbeddedBroker(log_path=tmp_path_factory.mktemp("fuzz") / "broker.log")
    b.start()
    b.create_topics({"fuzz": 2})
    stats = {"frames": 0, "closed": 0, "answered": 0}
    b.stats = stats
    yield b
    print(f"\nbroker fuzz: {stats['frames']} frames, {stats['closed']} connections closed, "
          f"{stats['answered']} still answering afterwards")
    b.stop()


def header(api_key: int, version: int, flexible: bool, corr: int = 7,
           client: bytes | None = b"fuzz") -> bytes:
    out = struct.pack(">hhi", api_key, version, corr)
    out += struct.pack(">h", -1) if client is None else struct.pack(">h", len(client)) + client
    return out + (b"\0" if flexible else b"")


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def read_frames(sock: socket.socket, timeout: float) -> tuple[list[int], bool]:
    """Correlation ids of the responses read until ``timeout``; and whether it closed."""
    sock.settimeout(timeout)
    buf, corrs = b"", []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            break
        except ConnectionResetError:
            return corrs, True
        if not chunk:
            return corrs, True
        buf += chunk
        while len(buf) >= 8:
            size = struct.unpack_from(">i", buf)[0]
            if len(buf) < 4 + size:
                break
            corrs.append(struct.unpack_from(">i", buf, 4)[0])
            buf = buf[4 + size:]
        if 0x5EED in corrs:
            break
    return corrs, False


def still_serving(b: EmbeddedBroker) -> None:
    host, port = b.bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(frame(API_VERSIONS_V0))
        corrs, closed = read_frames(sock, 10)
    assert 0x5EED in corrs and not closed, "the broker stopped serving new connections"


def throw(b: EmbeddedBroker, data: bytes, then_close: bool = False) -> None:
    """Send ``data``; unless told to hang up, follow with ApiVersions v0: the connection
    must then be closed, or answer it."""
    host, port = b.bootstrap.rsplit(":", 1)
    b.stats["frames"] += 1
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        try:
            sock.sendall(data)
            if then_close:
                return
            sock.sendall(frame(API_VERSIONS_V0))
        except (BrokenPipeError, ConnectionResetError):
            b.stats["closed"] += 1
            return
        corrs, closed = read_frames(sock, 15)
    if closed:
        b.stats["closed"] += 1
    else:
        assert 0x5EED in corrs, f"neither closed nor answering after {data[:64]!r}"
        b.stats["answered"] += 1


def test_every_api_and_version_survives_empty_cut_and_random_bodies(fuzz_broker):
    before = rss_bytes(fuzz_broker.proc.pid)
    for api_key, version, flexible in PAIRS:
        h = header(api_key, version, flexible)
        throw(fuzz_broker, frame(h))  # header only, no body
        throw(fuzz_broker, frame(h + b"\xff" * 16))  # negative lengths everywhere
        throw(fuzz_broker, frame(h + b"\x7f" * 16))  # huge lengths everywhere
        throw(fuzz_broker, frame(h + b"\0" * 8)[:-3], then_close=True)  # cut mid-frame
        throw(fuzz_broker, frame(h[:5]))  # cut inside the header
    for size in (-1, -(2**31), MAX_FRAME + 1, 2**31 - 1):  # oversized / negative sizes
        throw(fuzz_broker, struct.pack(">i", size) + b"\0" * 64)
    throw(fuzz_broker, frame(header(999, 0, False)))  # unknown api
    throw(fuzz_broker, frame(header(3, 999, False)))  # unknown version
    still_serving(fuzz_broker)
    grown = rss_bytes(fuzz_broker.proc.pid) - before
    print(f"\n{len(PAIRS)} api/version pairs; broker RSS grew {grown / 2**20:.1f} MiB")
    assert grown < 200 * 2**20


def test_a_huge_frame_sent_slowly_is_buffered_once_and_freed(fuzz_broker):
    """A client may announce a big (allowed) frame and dribble it: the broker buffers it
    (bounded by the max frame size) and frees it when the client goes away."""
    host, port = fuzz_broker.bootstrap.rsplit(":", 1)
    before = rss_bytes(fuzz_broker.proc.pid)
    announced = 64 * 2**20
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(struct.pack(">i", announced) + header(0, 9, True))
        chunk = b"\0" * 65536
        started = time.monotonic()
        for _ in range(256):  # 16 MiB of the 64 announced, in small pieces
            sock.sendall(chunk)
        dribble_s = time.monotonic() - started
    still_serving(fuzz_broker)
    time.sleep(1.0)
    grown = rss_bytes(fuzz_broker.proc.pid) - before
    print(f"\n16 MiB dribbled in {dribble_s:.1f} s; RSS grew {grown / 2**20:.1f} MiB after close")
    assert grown < 200 * 2**20


@settings(max_examples=knob(300, 5000), deadline=None, derandomize=not LONG, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(pair=st.sampled_from(PAIRS), body=st.binary(max_size=512),
       client=st.one_of(st.none(), st.binary(max_size=20)),
       cut=st.one_of(st.none(), st.integers(min_value=0, max_value=600)))
def test_random_bodies_for_every_api_and_version(fuzz_broker, pair, body, client, cut):
    api_key, version, flexible = pair
    data = frame(header(api_key, version, flexible, client=client) + body)
    if cut is not None and cut < len(data):
        throw(fuzz_broker, data[:cut], then_close=True)
    else:
        throw(fuzz_broker, data)


# -- well-formed requests with random values ------------------------------------------------

# Values that mean something to the handlers (group and topic names, protocol types, edge
# integers) are drawn often, so requests meet state left by earlier ones: a JoinGroup finds
# the group another one created, a SyncGroup a generation that exists.
_NAMES = st.sampled_from(["", "fuzz", "g", "h", "consumer", "range", "retention.ms",
                          "cleanup.policy", "max.message.bytes", "0"])
_STRINGS = _NAMES | st.text(max_size=12)
_INTS = st.sampled_from([-2, -1, 0, 1, 2, 3, 6000, 30000, 2**31 - 1, -(2**31)])


def _value(t, nullable: bool = False):
    if isinstance(t, Struct):
        inner = _struct(t.fields)
        return st.none() | inner if t.nullable else inner
    if isinstance(t, Array):
        item = _value(t.item) if isinstance(t.item, str) else _struct(t.item)
        lists = st.lists(item, max_size=3)
        return st.none() | lists if t.nullable else lists
    if t in ("int8", "int16"):
        return st.integers(-3, 4)
    if t in ("int32", "int64", "uint32"):
        return _INTS | st.integers(0, 5) if t != "uint32" else st.integers(0, 5)
    if t == "bool":
        return st.booleans()
    if t == "uuid":
        return st.binary(min_size=16, max_size=16)
    if t == "string":
        return _STRINGS
    if t == "nstring":
        return st.none() | _STRINGS
    if t in ("bytes", "records"):
        return st.binary(max_size=64)
    if t == "nbytes":
        return st.none() | st.binary(max_size=64)
    raise AssertionError(t)


def _struct(fields: list[Field]):
    return st.fixed_dictionaries({f.name: _value(f.type) for f in fields})


REQUESTS = sorted((s.key, v) for s in schemas.BY_KEY.values()
                  for v in range(s.min_version, s.max_version + 1)
                  if s.key not in (schemas.SASL_HANDSHAKE.key, schemas.SASL_AUTHENTICATE.key))
# A fetch, join or sync may be parked (long poll, rebalance): hang up instead of waiting.
PARKED = {schemas.FETCH.key, schemas.JOIN_GROUP.key, schemas.SYNC_GROUP.key}


@settings(max_examples=knob(400, 5000), deadline=None, derandomize=not LONG, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_well_formed_requests_with_random_values(fuzz_broker, data):
    key, version = data.draw(st.sampled_from(REQUESTS))
    schema = schemas.BY_KEY[key]
    body = data.draw(_struct(schema.request))
    frame_ = WireClient.__new__(WireClient)  # only its encoder: no connection
    frame_.client_id, frame_._corr = "fuzz", 0
    throw(fuzz_broker, frame_.encode(schema, version, body), then_close=key in PARKED)


def test_broker_still_serves_after_the_fuzzing(fuzz_broker):
    still_serving(fuzz_broker)
    assert fuzz_broker.is_running()
    log = fuzz_broker.log_path.read_text(errors="replace")
    for event in ("broker.handler_failed", "broker.internal_error"):
        assert f'"{event}"' not in log, [line for line in log.splitlines() if event in line][:3]
