"""The pieces a broker connection is made of, each on its own, without a socket: the
framer (chunks that split and merge frames, the caps, the request pool), the response
queue (request order whatever order futures complete in, corking, streaming), the SASL
steps (what passes before login, failure, login, the timeout), the read gate, and the
dispatch (header checks, the handler and its caller)."""

from __future__ import annotations

import asyncio
import base64
import os
import struct

import pytest

from appliance.broker.caller import Caller
from appliance.broker.connections.auth_steps import AuthSteps
from appliance.broker.connections.dispatch import RequestDispatch
from appliance.broker.connections.framing import Framer
from appliance.broker.connections.read_gate import ReadGate
from appliance.broker.connections.request_pool import SMALL_FRAME, RequestPool
from appliance.broker.connections.responses import ResponseQueue
from appliance.broker.security import sasl, scram
from appliance.broker.security.credentials import Users
from appliance.broker.wire import errors, schemas
from appliance.broker.wire.client import decode_response, encode_request
from appliance.broker.wire.codec import Reader
from appliance.broker.wire.request_limits import RequestLimits

LIMITS = RequestLimits(produce_frame_bytes=1 << 20, group_frame_bytes=1 << 20,
                       other_frame_bytes=1000)


class Transport:
    """What the pieces call on asyncio's transport, recorded."""

    def __init__(self) -> None:
        self.written: list[bytes] = []
        self.reading = True

    def write(self, data: bytes) -> None:
        self.written.append(bytes(data))

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True


class Sink:
    """A connection as the framer sees it: takes frames while not busy."""

    def __init__(self, one_at_a_time: bool = False) -> None:
        self.frames: list[bytes] = []
        self.refused: list[tuple[str, dict]] = []
        self.one_at_a_time = one_at_a_time
        self.busy = False

    def wants_frame(self) -> bool:
        return not self.busy

    def take_frame(self, frame: memoryview) -> bool:
        self.frames.append(bytes(frame))
        self.busy = self.one_at_a_time
        return True

    def refuse_frame(self, reason: str, **fields: int) -> None:
        self.refused.append((reason, fields))


def _frame(api_key: int, body: bytes = b"") -> bytes:
    payload = struct.pack(">hhi", api_key, 0, 7) + body
    return struct.pack(">i", len(payload)) + payload


def _framer(pool_limit: int = 1 << 30, max_frame: int = 1 << 20) -> tuple[Framer, ReadGate]:
    gate = ReadGate()
    gate.transport = Transport()  # type: ignore[assignment]
    return Framer(LIMITS, RequestPool(pool_limit), gate, max_frame), gate


def _feed(framer: Framer, sink: Sink, chunk: bytes) -> None:
    data = framer.received(chunk)
    if data is not None:
        pos = framer.split(data, sink)
        if pos < len(data):
            framer.keep(memoryview(data)[pos:])
            framer.frame_waiting()


@pytest.mark.parametrize("chunk_size", [1, 3, 7, 1000])
def test_frames_come_out_whole_however_the_bytes_are_chunked(chunk_size):
    frames = [_frame(schemas.METADATA.key, b"x" * n) for n in (0, 5, 300)]
    stream = b"".join(frames)
    framer, _ = _framer()
    sink = Sink()
    for at in range(0, len(stream), chunk_size):
        _feed(framer, sink, stream[at:at + chunk_size])
    assert sink.frames == [f[4:] for f in frames]
    assert not framer.buf and not sink.refused


def test_a_frame_over_its_apis_limit_is_refused_before_it_is_read():
    framer, _ = _framer()
    sink = Sink()
    # Metadata may be 1000 bytes; a 5000-byte one is refused at its first six bytes.
    _feed(framer, sink, struct.pack(">ih", 5000, schemas.METADATA.key))
    assert sink.refused == [("request frame over its API's limit",
                             {"api_key": schemas.METADATA.key, "frame_size": 5000,
                              "limit_bytes": 1000})]
    # A produce of the same size is under its own limit: it waits for the rest.
    framer, _ = _framer()
    sink = Sink()
    _feed(framer, sink, struct.pack(">ih", 5000, schemas.PRODUCE.key))
    assert not sink.refused and not sink.frames and len(framer.buf) == 6


@pytest.mark.parametrize("size", [-1, 2_000_000])
def test_a_size_out_of_range_is_refused(size):
    framer, _ = _framer(max_frame=1 << 20)
    sink = Sink()
    _feed(framer, sink, struct.pack(">i", size))
    assert sink.refused == [("frame size out of range",
                             {"frame_size": size, "max_frame_bytes": 1 << 20})]


def test_a_busy_sink_leaves_the_rest_buffered():
    framer, _ = _framer()
    sink = Sink(one_at_a_time=True)
    two = _frame(schemas.METADATA.key, b"a") + _frame(schemas.METADATA.key, b"b")
    _feed(framer, sink, two)
    assert sink.frames == [_frame(schemas.METADATA.key, b"a")[4:]]
    sink.busy = False
    data = framer.take_buffered()
    assert data is not None and framer.split(data, sink) == len(data)
    assert sink.frames[1] == _frame(schemas.METADATA.key, b"b")[4:]


def test_a_large_frame_waits_for_request_pool_bytes_and_gives_them_back():
    size = SMALL_FRAME * 2
    framer, gate = _framer(pool_limit=size * 3 // 2)
    other = Framer(LIMITS, framer.pool, ReadGate(), 1 << 20)
    head = struct.pack(">ihhi", size, schemas.PRODUCE.key, 0, 1)
    _feed(other, Sink(), head)  # another connection holds most of the pool
    assert framer.pool.used == size
    _feed(framer, Sink(), head)
    assert gate.reasons == {"pool"} and not gate.transport.reading  # type: ignore[union-attr]
    other.release()  # the other connection goes away: its bytes come back, ours granted
    assert gate.reasons == set() and gate.transport.reading  # type: ignore[union-attr]
    assert framer.pool.used == size
    sink = Sink()
    _feed(framer, sink, b"\0" * (size - 8))  # the rest of the frame
    assert len(sink.frames) == 1 and framer.pool.used == 0


def test_a_grant_to_a_closed_connection_goes_back_to_the_pool():
    size = SMALL_FRAME * 2
    holder, _ = _framer(pool_limit=size)
    waiter = Framer(LIMITS, holder.pool, ReadGate(), 1 << 20)
    head = struct.pack(">ihhi", size, schemas.PRODUCE.key, 0, 1)
    _feed(holder, Sink(), head)
    _feed(waiter, Sink(), head)
    waiter.gate.shut = True
    waiter.buf.clear()  # closing clears the buffer before the grant arrives
    holder.release()
    assert holder.pool.used == 0


def test_the_read_gate_resumes_only_when_every_reason_is_lifted():
    gate = ReadGate()
    transport = Transport()
    gate.transport = transport  # type: ignore[assignment]
    gate.pause("busy")
    gate.pause("write")
    gate.resume("busy")
    assert not transport.reading and gate.reasons == {"write"}
    gate.resume("write")
    assert transport.reading
    gate.pause("busy")
    gate.shut = True
    gate.resume("busy")
    assert not transport.reading  # a closed connection is never read again


class Owner:
    """A connection as the response queue sees it."""

    def __init__(self) -> None:
        self.closed = False
        self.events: list[str] = []

    def all_sent(self) -> None:
        self.events.append("all_sent")

    def no_answer(self) -> None:
        self.events.append("no_answer")

    def answer_failed(self, exc: BaseException) -> None:
        self.events.append(f"failed {exc}")
        self.closed = True

    def answers_flushed(self) -> None:
        self.events.append("flushed")


def _queue(write_high: int = 1 << 20, stream_run: int = 1 << 16
           ) -> tuple[ResponseQueue, Owner, Transport]:
    owner, transport = Owner(), Transport()
    queue = ResponseQueue(owner, True, write_high, stream_run)
    queue.transport = transport  # type: ignore[assignment]
    return queue, owner, transport


def _token(text: str) -> dict:
    return {"error_code": errors.NONE, "auth_bytes": text.encode()}


def _answer(queue: ResponseQueue, body) -> None:
    queue.respond(False, -1, None, 0, body)  # a bare token: its frame is its text


def test_answers_leave_in_request_order_whatever_order_futures_complete_in():
    async def run() -> tuple[list[bytes], list[str]]:
        queue, owner, transport = _queue()
        loop = asyncio.get_running_loop()
        first, third = loop.create_future(), loop.create_future()
        _answer(queue, first)
        _answer(queue, _token("second"))
        _answer(queue, third)
        third.set_result(_token("third"))
        await asyncio.sleep(0)
        assert transport.written == [] and queue.in_progress
        first.set_result(_token("first"))
        await asyncio.sleep(0)
        assert not queue.in_progress
        return transport.written, owner.events

    written, events = asyncio.run(run())
    assert [w[4:] for w in written] == [b"first", b"second", b"third"]
    assert events[-1] == "flushed" and "all_sent" in events


def test_a_failed_future_closes_and_a_cancelled_one_is_skipped():
    async def run() -> tuple[list[bytes], list[str]]:
        queue, owner, transport = _queue()
        loop = asyncio.get_running_loop()
        cancelled, failed = loop.create_future(), loop.create_future()
        _answer(queue, cancelled)
        _answer(queue, _token("kept"))
        _answer(queue, failed)
        _answer(queue, _token("never"))
        cancelled.cancel()
        await asyncio.sleep(0)
        failed.set_exception(RuntimeError("worker died"))
        await asyncio.sleep(0)
        return transport.written, owner.events

    written, events = asyncio.run(run())
    assert [w[4:] for w in written] == [b"kept"]
    assert "failed worker died" in events


def test_corked_answers_leave_in_one_write_and_a_failed_token_has_none():
    queue, owner, transport = _queue()
    queue.cork()
    _answer(queue, _token("a"))
    _answer(queue, _token("b"))
    assert transport.written == []
    queue.uncork()
    assert transport.written == [b"\0\0\0\x01a\0\0\0\x01b"]
    _answer(queue, {"error_code": errors.SASL_AUTHENTICATION_FAILED, "auth_bytes": b""})
    assert owner.events[-1] == "no_answer" and len(transport.written) == 1


def test_a_large_response_streams_in_pieces_and_reports_sent_after_the_last():
    body = {"error_code": 0, "api_keys": [{"api_key": k, "min_version": 0, "max_version": 3}
                                          for k in range(200)]}
    queue, owner, transport = _queue(write_high=256, stream_run=64)
    queue.write_paused = True  # the socket is full: the first piece waits
    queue.respond(False, 42, schemas.API_VERSIONS, 0, body)
    assert transport.written == []
    assert "all_sent" not in owner.events
    queue.write_paused = False
    queue.resume()
    assert len(transport.written) > 1 and owner.events == ["all_sent"]
    whole = b"".join(transport.written)
    assert struct.unpack_from(">ii", whole) == (len(whole) - 4, 42)
    r = Reader(memoryview(whole), 8)
    assert r.int16() == 0


USER, PASSWORD = "alice", "correct horse"


def _settings(*mechanisms: str) -> sasl.SaslSettings:
    cred = scram.ScramCredential.derive(scram.SHA_256, PASSWORD,
                                        iterations=scram.MIN_ITERATIONS)
    return sasl.SaslSettings(mechanisms, Users({USER: {"SCRAM-SHA-256": cred}}))


def _steps(session: sasl.SaslSession | None, logins: list, timeout_ms: int = 10_000
           ) -> AuthSteps:
    return AuthSteps(session, None, timeout_ms, logins.append)


def test_without_sasl_every_request_passes_and_a_sasl_request_is_out_of_place():
    steps = _steps(None, [])
    assert not steps.waiting and steps.admits(schemas.PRODUCE.key)
    answer = steps.step(schemas.SASL_HANDSHAKE.key, 1, {"mechanism": "PLAIN"})
    assert answer["error_code"] == errors.ILLEGAL_SASL_STATE and not steps.failed


def test_before_login_only_the_exchange_passes_and_a_bad_mechanism_fails():
    steps = _steps(sasl.SaslSession(_settings("SCRAM-SHA-256")), [])
    assert steps.waiting
    assert steps.admits(schemas.API_VERSIONS.key) and steps.admits(schemas.SASL_HANDSHAKE.key)
    assert not steps.admits(schemas.METADATA.key)
    answer = steps.step(schemas.SASL_HANDSHAKE.key, 1, {"mechanism": "PLAIN"})
    assert answer["error_code"] == errors.UNSUPPORTED_SASL_MECHANISM
    assert steps.failed and steps.waiting


def test_a_v0_handshake_makes_the_next_frame_a_bare_token():
    steps = _steps(sasl.SaslSession(_settings("SCRAM-SHA-256")), [])
    steps.step(schemas.SASL_HANDSHAKE.key, 0, {"mechanism": "SCRAM-SHA-256"})
    assert steps.expects_raw_token and not steps.failed


def _scram_login(steps: AuthSteps, password: str) -> dict:
    mech = scram.SHA_256
    steps.step(schemas.SASL_HANDSHAKE.key, 1, {"mechanism": mech.name})
    nonce = base64.b64encode(os.urandom(12)).decode()
    first_bare = f"n={USER},r={nonce}"
    first = steps.step(schemas.SASL_AUTHENTICATE.key, 2,
                       {"auth_bytes": ("n,," + first_bare).encode()})
    server_first = bytes(first["auth_bytes"]).decode()
    fields = dict(p.split("=", 1) for p in server_first.split(","))
    salted = mech.salted_password(password, base64.b64decode(fields["s"]), int(fields["i"]))
    client_key = mech.hmac(salted, b"Client Key")
    bare_final = f"c=biws,r={fields['r']}"
    signature = mech.hmac(mech.h(client_key),
                          f"{first_bare},{server_first},{bare_final}".encode())
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature,
                                                          strict=True))).decode()
    answer = steps.step(schemas.SASL_AUTHENTICATE.key, 2,
                        {"auth_bytes": f"{bare_final},p={proof}".encode()})
    assert isinstance(answer, dict)
    return answer


def test_a_login_lifts_the_gate_and_stops_the_clock():
    async def run() -> tuple[list, list, AuthSteps]:
        logins: list = []
        timeouts: list = []
        steps = _steps(sasl.SaslSession(_settings("SCRAM-SHA-256")), logins, timeout_ms=50)
        steps.start_clock("peer", lambda: timeouts.append(1))
        assert _scram_login(steps, PASSWORD)["error_code"] == errors.NONE
        await asyncio.sleep(0.1)
        return logins, timeouts, steps

    logins, timeouts, steps = asyncio.run(run())
    assert logins == [USER] and timeouts == []
    assert not steps.waiting and steps.admits(schemas.PRODUCE.key) and not steps.failed


def test_a_wrong_password_fails_and_no_login_happens():
    logins: list = []
    steps = _steps(sasl.SaslSession(_settings("SCRAM-SHA-256")), logins)
    assert _scram_login(steps, "wrong")["error_code"] == errors.SASL_AUTHENTICATION_FAILED
    assert steps.failed and steps.waiting and logins == []


def test_no_login_within_the_timeout_calls_timeout():
    async def run() -> list:
        timeouts: list = []
        steps = _steps(sasl.SaslSession(_settings("SCRAM-SHA-256")), [], timeout_ms=20)
        steps.start_clock("peer", lambda: timeouts.append(1))
        await asyncio.sleep(0.1)
        return timeouts

    assert asyncio.run(run()) == [1]


class Requests:
    """A connection as the dispatch sees it: closes and acks=0 completions, recorded."""

    def __init__(self) -> None:
        self.closed: list[tuple[str, dict]] = []
        self.done = 0

    def close(self, reason: str, **fields) -> None:
        self.closed.append((reason, fields))

    def request_done(self) -> None:
        self.done += 1


def _dispatch(handlers: dict, session: sasl.SaslSession | None = None
              ) -> tuple[RequestDispatch, Requests, Transport]:
    queue, _, transport = _queue()
    owner = Requests()
    steps = _steps(session, [])
    dispatch = RequestDispatch(handlers, lambda: [], 100, steps, queue, owner)
    dispatch.caller = Caller("", "10.0.0.7")
    return dispatch, owner, transport


def _request(schema, version: int, body: dict, client_id: str = "app-1") -> memoryview:
    return memoryview(encode_request(schema, version, body, 9, client_id))[4:]


def test_a_request_reaches_its_handler_with_its_caller_and_is_answered():
    seen: list = []

    def api_versions(version: int, req: dict, caller: Caller) -> dict:
        seen.append(caller)
        return {"error_code": 0, "api_keys": []}

    dispatch, owner, transport = _dispatch({schemas.API_VERSIONS.key: api_versions})
    dispatch.handle(_request(schemas.API_VERSIONS, 0, {}))
    assert seen == [Caller("app-1", "10.0.0.7")] and not owner.closed
    assert decode_response(schemas.API_VERSIONS, 0, transport.written[0][4:])[0] == 9


def test_a_request_without_an_answer_is_done_at_once():
    dispatch, owner, transport = _dispatch({schemas.API_VERSIONS.key: lambda v, r, c: None})
    dispatch.handle(_request(schemas.API_VERSIONS, 0, {}))
    assert owner.done == 1 and transport.written == []


@pytest.mark.parametrize(("frame", "reason"), [
    (b"\0\x12", "request shorter than a header"),
    (struct.pack(">hhi", 999, 0, 1), "unsupported api"),
    (struct.pack(">hhi", schemas.METADATA.key, 99, 1), "unsupported api version"),
    (struct.pack(">hhih", schemas.METADATA.key, 1, 1, 50), "malformed request"),
])
def test_a_bad_header_closes_naming_why(frame, reason):
    dispatch, owner, transport = _dispatch({})
    dispatch.handle(memoryview(frame))
    assert [r for r, _ in owner.closed] == [reason] and transport.written == []


def test_an_api_versions_probe_above_the_range_is_answered_in_v0():
    dispatch, owner, transport = _dispatch({})
    dispatch.handle(memoryview(struct.pack(">hhih", schemas.API_VERSIONS.key, 99, 5, -1)))
    corr, body = decode_response(schemas.API_VERSIONS, 0, transport.written[0][4:])
    assert corr == 5 and body["error_code"] == errors.UNSUPPORTED_VERSION
    assert not owner.closed


def test_before_login_a_request_other_than_the_exchange_closes():
    dispatch, owner, _ = _dispatch({}, sasl.SaslSession(_settings("SCRAM-SHA-256")))
    dispatch.handle(_request(schemas.METADATA, 1, {"topics": None}))
    assert owner.closed == [("request before authentication",
                             {"api_key": schemas.METADATA.key})]
