"""The TCP side: framing, header parsing, dispatch, and in-order responses per connection.

Requests on one connection are processed as they arrive, but responses leave in request
order (Kafka's per-connection guarantee): a long-polling fetch holds back the responses
queued behind it, never the processing of the requests themselves.

Nothing one client does may stall the others on the one event loop: a connection over the
per-IP cap is closed when accepted, before its TLS handshake (the listener accepts plain
TCP and starts TLS itself, for that reason); requests of connections that have not
authenticated wait in a queue worked on for a bounded time per loop iteration
(``connections.preauth_queue``); SASL/PLAIN passwords are checked in worker processes
(``security.password_pool``).
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import struct
import time
from collections import deque
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any, cast

from appliance.broker.apis import Apis
from appliance.broker.broker_metrics import BrokerMetrics
from appliance.broker.caller import Caller
from appliance.broker.connections.cap import ConnectionCap
from appliance.broker.connections.preauth_queue import PreAuthQueue
from appliance.broker.connections.rate import THROTTLED_CLOSE_S, ConnectionRate
from appliance.broker.security import listener, sasl
from appliance.broker.security.password_pool import PasswordWorkers
from appliance.broker.settings import BrokerConfig
from appliance.broker.storage.segments import Storage
from appliance.broker.storage.topic_registry import TopicRegistry
from appliance.broker.wire import errors, schemas
from appliance.broker.wire.codec import DecodeError, Reader, Schema, Writer
from appliance.broker.wire.codegen import decode_struct, encode_struct, strict_from_env
from appliance.logs import get_logger

log = get_logger("appliance.broker")
_SIZE = struct.Struct(">i")
ACCEPT_RETRY_S = 0.1  # after a failed accept (descriptors exhausted): do not spin


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET
_HEADER = struct.Struct(">hhi")  # api_key, api_version, correlation_id


@dataclass(slots=True)
class PendingResponse:
    """A response waiting its turn: ``result`` is the body, or a Future of it (long poll).
    ``schema`` None: a bare SASL token (after SaslHandshake v0), not a Kafka response."""

    header_flexible: bool
    correlation_id: int
    schema: Schema | None
    version: int
    result: Any


class BrokerServer:
    def __init__(self, config: BrokerConfig, metrics: BrokerMetrics | None = None) -> None:
        self.config = config
        self.metrics = metrics  # counters for --metrics-port; None: nothing counted
        self.security = listener.from_config(config)  # ListenerError: unusable TLS/SASL
        self.storage = Storage(config) if config.data_dir else None
        self.registry = TopicRegistry(config, self.storage)
        self.registry.recover()
        for name, count in config.initial_topics.items():
            if name not in self.registry.topics:
                self.registry.create(name, count)
        self.apis = Apis(config, self.registry, self.storage)
        self._server: asyncio.base_events.Server | None = None  # plain listeners
        self._tls_listener: socket.socket | None = None  # TLS listeners accept themselves
        self._accept_task: asyncio.Task | None = None
        self._handshakes: set[asyncio.Task] = set()
        self._retention_timer: asyncio.TimerHandle | None = None
        self.connections: set[Connection] = set()
        self.connection_cap = ConnectionCap(config.max_connections_per_ip)
        self.connection_rate = ConnectionRate(config.max_connection_creation_rate_per_ip)
        self._held: set[socket.socket] = set()  # TLS sockets over the rate, closed later
        self.preauth = PreAuthQueue()
        sasl_settings = self.security.sasl
        self.password_checks = (PasswordWorkers(config.password_check_workers)
                                if sasl_settings is not None
                                and sasl.PLAIN in sasl_settings.mechanisms else None)
        # Strict response encoding (missing/unknown keys raise): on in the test suite.
        self.strict_encoding = strict_from_env()

    async def start(self) -> tuple[str, int]:
        loop = asyncio.get_running_loop()
        context = self.security.ssl_context
        if context is None:
            self._server = await loop.create_server(
                lambda: Connection(self), self.config.host, self.config.port,
                reuse_address=True)
            sock = self._server.sockets[0]
        else:
            # TLS listeners accept themselves: the per-IP cap is checked on the raw socket,
            # before any handshake work (a flood from one address costs an accept and a
            # close), and TLS then takes the socket over before a byte is read. Pausing a
            # plain transport in connection_made and calling start_tls is not enough:
            # asyncio before 3.12 and uvloop start reading after connection_made anyway,
            # so a ClientHello could reach the Kafka frame parser.
            sock = socket.create_server((self.config.host, self.config.port),
                                        family=_family(self.config.host))
            sock.setblocking(False)
            self._tls_listener = sock
            self._accept_task = loop.create_task(self._accept_tls(sock, context))
        if self.password_checks is not None:
            self.password_checks.start()
        host, port = sock.getsockname()[:2]
        self.apis.advertised_port = port
        self._schedule_retention()
        if self.storage is not None:
            self.storage.start(loop)
        return self.apis.advertised_host, port

    async def _accept_tls(self, listener: socket.socket, context: ssl.SSLContext) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                sock, addr = await loop.sock_accept(listener)
            except OSError as exc:  # out of descriptors, a reset before accept: go on
                log.warning("broker.accept_failed", error=repr(exc))
                await asyncio.sleep(ACCEPT_RETRY_S)
                continue
            ip = addr[0] if isinstance(addr, tuple) else str(addr)
            if not self.connection_cap.admit(ip):
                sock.close()
                continue
            if not self.connection_rate.take(ip):
                self._held.add(sock)  # unread, no handshake: see connections/rate.py
                loop.call_later(THROTTLED_CLOSE_S, self._close_held, sock, ip)
                continue
            task = loop.create_task(self._handshake(sock, addr, ip, context))
            self._handshakes.add(task)
            task.add_done_callback(self._handshakes.discard)

    def _close_held(self, sock: socket.socket, ip: str) -> None:
        if sock in self._held:  # not already closed by stop()
            self._held.discard(sock)
            sock.close()
            self.connection_cap.release(ip)

    async def _handshake(self, sock: socket.socket, addr: object, ip: str,
                         context: ssl.SSLContext) -> None:
        """TLS on an admitted socket; the Connection sees only decrypted bytes."""
        conn = Connection(self, admitted_ip=ip)
        try:
            await asyncio.get_running_loop().connect_accepted_socket(
                lambda: conn, sock, ssl=context,
                ssl_handshake_timeout=self.config.auth_timeout_ms / 1000.0)
        except Exception as exc:  # TLS errors, timeouts, resets: this connection only
            log.info("broker.tls_handshake_failed", peer=str(addr), error=repr(exc))
            sock.close()
            if not conn.made:  # connection_made never ran: the cap's count is ours
                self.connection_cap.release(ip)

    def _schedule_retention(self) -> None:
        loop = asyncio.get_running_loop()
        self._retention_timer = loop.call_later(self.config.retention_check_ms / 1000.0,
                                                self._retention_tick)

    def _retention_tick(self) -> None:
        try:
            dropped = self.registry.enforce_retention()
            if dropped:
                log.info("broker.retention", dropped_batches=dropped)
        except Exception:
            log.exception("broker.retention_failed")
        self._schedule_retention()

    async def stop(self) -> None:
        if self._retention_timer is not None:
            self._retention_timer.cancel()
        if self._server is not None:
            self._server.close()
        if self._accept_task is not None:
            self._accept_task.cancel()
            for task in list(self._handshakes):
                task.cancel()
        if self._tls_listener is not None:
            self._tls_listener.close()
        for sock in list(self._held):
            sock.close()
        self._held.clear()
        for conn in list(self.connections):
            if conn.closed:  # held off, or answered a failed login: nothing to log
                conn.close_quietly()
            else:
                conn.close("broker stopping")
        if self._server is not None:
            await self._server.wait_closed()
        if self.storage is not None:
            self.storage.close()
        self.apis.offsets.close()
        if self.password_checks is not None:
            self.password_checks.shutdown()


class Connection(asyncio.Protocol):
    def __init__(self, server: BrokerServer, admitted_ip: str | None = None) -> None:
        self.server = server
        self.admitted_ip = admitted_ip  # TLS listeners: the cap and rate let it in on accept
        self.made = False  # connection_made ran (TLS: the handshake finished)
        self.apis = server.apis
        self.max_frame = server.config.max_frame_bytes
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self._corked: list[bytes] | None = None  # responses held to leave in one send()
        self.pending: deque[PendingResponse] = deque()
        self.strict = server.strict_encoding
        self.peer = None
        # who sends on this connection: rebuilt only when the header's client id changes
        self._client_id_raw = b""
        self._caller = Caller("", "")
        self.ip: str | None = None  # counted by the server's ConnectionCap while open
        self.closed = False
        self.closing = False  # answered an auth failure: close once the answer is sent
        # SASL listeners: nothing but the handshake until authenticated (sasl.py)
        self.sasl = server.security.new_session()
        self._auth_timer: asyncio.TimerHandle | None = None
        self._close_timer: asyncio.TimerHandle | None = None
        self._deferred: deque[memoryview] = deque()  # requests in the server's PreAuthQueue
        if self.sasl is not None:
            self.max_frame = min(self.max_frame, sasl.UNAUTHENTICATED_MAX_FRAME)

    # -- asyncio callbacks ----------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.made = True
        self.transport = transport  # type: ignore[assignment]
        self.peer = transport.get_extra_info("peername")
        ip = self.peer[0] if isinstance(self.peer, tuple) else str(self.peer)
        if self.admitted_ip is not None:
            ip = self.admitted_ip
        elif not self.server.connection_cap.admit(ip):
            self.closed = True
            cast(asyncio.Transport, transport).abort()
            return
        self.ip = ip
        if self.admitted_ip is None and not self.server.connection_rate.take(ip):
            # over its IP's creation rate: unread, closed later (see connections/rate.py);
            # uvloop starts reading after this returns, so data_received checks ``closed``
            self.closed = True
            self._stop_reading()
            self._close_timer = asyncio.get_running_loop().call_later(
                THROTTLED_CLOSE_S, self.close_quietly)
            self.server.connections.add(self)
            return
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
        self._caller = Caller("", ip)
        self.server.connections.add(self)
        if self.server.metrics is not None:
            self.server.metrics.connections_opened += 1
        self._channel_ready()

    def _channel_ready(self) -> None:
        """TLS (if any) is up: SASL must now finish within the auth timeout."""
        if self.sasl is not None:
            self._auth_timer = asyncio.get_running_loop().call_later(
                self.server.config.auth_timeout_ms / 1000.0, self._auth_timeout)

    def _stop_reading(self) -> None:
        try:
            cast(asyncio.Transport, self.transport).pause_reading()
        except (AttributeError, RuntimeError):  # closing already, or no transport
            pass

    def close_quietly(self) -> None:
        """Close without a log line (the caller logged why)."""
        self.closed = True
        self.buf.clear()
        if self.transport is not None:
            self.transport.abort()
        self._release()

    def _release(self) -> None:
        if self.ip is not None:
            self.server.connection_cap.release(self.ip)
            self.ip = None

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._release()
        for timer in (self._auth_timer, self._close_timer):
            if timer is not None:
                timer.cancel()
        self.server.connections.discard(self)
        for entry in self.pending:
            result = entry.result
            if isinstance(result, asyncio.Future) and not result.done():
                result.cancel()
        self.pending.clear()
        if self.buf:
            log.info("broker.client_disconnected_mid_request", peer=str(self.peer),
                     buffered_bytes=len(self.buf))

    def pause_writing(self) -> None:
        if self.transport is not None:
            self.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.transport is not None and not self.closed and not self._deferred:
            self.transport.resume_reading()

    def data_received(self, data: bytes) -> None:
        if self.closed:  # held off (over the creation rate) or closing: never read
            self._stop_reading()
            return
        if self.server.metrics is not None:
            self.server.metrics.bytes_in += len(data)
        if self.buf:  # a partial frame is pending: join once, then parse from bytes
            self.buf += data
            if len(self.buf) >= 4:
                size = _SIZE.unpack_from(self.buf, 0)[0]
                if 0 <= size <= self.max_frame and len(self.buf) - 4 < size:
                    # Still short of the pending frame: copying the whole buffer to parse
                    # nothing would make a big frame sent in small pieces cost O(n^2).
                    return
            data = bytes(self.buf)
            self.buf.clear()
        view = memoryview(data)  # frames are parsed in place, without copying
        pos, n = 0, len(data)
        # Responses to requests that arrived together leave together: one send() syscall
        # (costly in a VM) instead of one per pipelined request.
        self._corked = []
        try:
            pos = self._parse_frames(data, view, pos, n)
        finally:
            corked, self._corked = self._corked, None
            if corked and not self.closed and self.transport is not None:
                self.transport.write(corked[0] if len(corked) == 1 else b"".join(corked))
            if self.closing and not self.closed and not self.pending:
                self._close_after_answer()  # else once the answers before it are out
        if pos < n and not self.closed:
            self.buf += view[pos:]

    def _parse_frames(self, data: bytes, view: memoryview, pos: int, n: int) -> int:
        """Handle every whole frame in ``data``; returns where the partial tail starts."""
        while n - pos >= 4:
            size = _SIZE.unpack_from(data, pos)[0]
            if size < 0 or size > self.max_frame:
                self.close("frame size out of range", frame_size=size,
                           max_frame_bytes=self.max_frame)
                return n
            if n - pos - 4 < size:
                break
            try:
                self._on_frame(view[pos + 4:pos + 4 + size])
            except Exception as exc:  # a bug must cost one connection, never the broker
                log.exception("broker.internal_error", peer=str(self.peer))
                self.close("internal error", error=repr(exc))
                return n
            pos += 4 + size
            if self.closed or self.closing:
                return n
        return pos

    # -- requests -------------------------------------------------------------------------

    def close(self, reason: str, **fields) -> None:
        if not self.closed:
            log.warning("broker.connection_closed", peer=str(self.peer), reason=reason, **fields)
            self.close_quietly()

    def _auth_timeout(self) -> None:
        if self.sasl is not None and not self.sasl.authenticated:
            self.close("authentication timed out",
                       timeout_ms=self.server.config.auth_timeout_ms)

    def _close_after_answer(self) -> None:
        """Read nothing more, then close gracefully after the configured delay: the failure
        answer already written reaches the client, and is read before the close."""
        session = self.sasl
        log.warning("broker.authentication_failed", peer=str(self.peer),
                    mechanism=session.mechanism if session else None,
                    reason=session.failure if session else None)
        self.closed = True
        self.buf.clear()
        if self.transport is None:
            return
        self.transport.pause_reading()  # what the client still sends is never read
        if self._auth_timer is not None:
            self._auth_timer.cancel()
        delay_s = self.server.config.failed_auth_close_delay_ms / 1000.0
        if delay_s <= 0:
            self.transport.close()
        else:
            self._close_timer = asyncio.get_running_loop().call_later(
                delay_s, self.transport.close)

    def _on_frame(self, frame: memoryview) -> None:
        if self._deferred or (self.sasl is not None and not self.sasl.authenticated):
            self._defer(frame)
        else:
            self._handle(frame)

    def _defer(self, frame: memoryview) -> None:
        """Not authenticated yet: the request waits its turn, and nothing more is read."""
        if not self._deferred:
            self.server.preauth.submit(self)
            if self.transport is not None:
                self.transport.pause_reading()
        self._deferred.append(frame)

    def run_deferred(self) -> bool:
        """The PreAuthQueue's turn: handle one waiting request; True if more wait."""
        if self.closed or not self._deferred:
            self._deferred.clear()
            return False
        try:
            self._handle(self._deferred.popleft())
        except Exception as exc:  # a bug must cost one connection, never the broker
            log.exception("broker.internal_error", peer=str(self.peer))
            self.close("internal error", error=repr(exc))
        if self.closed or self.closing:
            self._deferred.clear()
            if self.closing and not self.closed and not self.pending:
                self._close_after_answer()
            return False
        if self._deferred:
            return True
        if self.transport is not None:
            self.transport.resume_reading()
        return False

    def _handle(self, frame: memoryview) -> None:
        if self.sasl is not None and self.sasl.expects_raw_token:
            # After SaslHandshake v0 the whole frame is the token; so is the answer.
            self._respond(False, -1, None, 0, self._sasl_step(
                schemas.SASL_AUTHENTICATE.key, 0, {"auth_bytes": bytes(frame)}))
            return
        if len(frame) < _HEADER.size:
            self.close("request shorter than a header", frame_size=len(frame))
            return
        api_key, version, corr = _HEADER.unpack_from(frame)
        if (self.sasl is not None and not self.sasl.authenticated
                and api_key not in sasl.PRE_AUTH_APIS):
            self.close("request before authentication", api_key=api_key)
            return
        schema = schemas.BY_KEY.get(api_key)
        if schema is None:
            self.close("unsupported api", api_key=api_key, api_version=version)
            return
        if not schema.min_version <= version <= schema.max_version:
            if api_key == schemas.API_VERSIONS.key:
                # Clients probe with their newest ApiVersions; answer in v0 so they can
                # read our ranges and retry with one we support.
                log.debug("broker.api_versions_fallback", requested=version, peer=str(self.peer))
                self._respond(False, corr, schema, 0, {
                    "error_code": errors.UNSUPPORTED_VERSION,
                    "api_keys": Apis.api_version_list()})
                return
            self.close("unsupported api version", api=schema.name, api_version=version,
                       supported=f"{schema.min_version}-{schema.max_version}")
            return
        flexible = schema.flexible(version)
        r = Reader(frame, _HEADER.size)
        try:
            n = r.int16()
            client_id = r.raw(n) if n > 0 else b""
            if flexible:
                r.skip_tagged()
            req = decode_struct(schema.request, r, version, flexible, schema.name + "Request")
        except DecodeError as exc:
            self.close("malformed request", api=schema.name, api_version=version,
                       error=str(exc))
            return
        metrics = self.server.metrics
        started = time.perf_counter() if metrics is not None else 0.0
        if api_key in sasl.SASL_API_KEYS:
            self._respond(schemas.response_header_flexible(api_key, version), corr, schema,
                          version, self._sasl_step(api_key, version, req))
            return
        if client_id != self._client_id_raw:
            self._client_id_raw = bytes(client_id)
            self._caller = self._caller._replace(
                client_id=str(self._client_id_raw, "utf-8", "replace"))
        try:
            result = self.apis.handlers[api_key](version, req, self._caller)
        except Exception as exc:
            log.exception("broker.handler_failed", api=schema.name, api_version=version)
            self.close("handler failed", error=repr(exc))
            return
        if metrics is not None and result is not None:
            metrics.request_done(api_key, started, result)
        if result is None:
            return  # acks=0 produce: no response by protocol
        self._respond(schemas.response_header_flexible(api_key, version), corr, schema,
                      version, result)

    def _sasl_step(self, api_key: int, version: int, req: dict) -> dict | asyncio.Future:
        if self.sasl is None:
            return sasl.not_on_this_listener(api_key)
        step = self.sasl.handle(api_key, version, req)
        if isinstance(step, sasl.PasswordCheck):
            return self._check_password(api_key, step)
        return self._after_sasl(api_key, step)

    def _check_password(self, api_key: int, check: sasl.PasswordCheck) -> asyncio.Future:
        """The SaslAuthenticate answer, once a worker has checked the password."""
        workers = self.server.password_checks
        assert workers is not None  # a listener offering PLAIN has them
        answer = asyncio.get_running_loop().create_future()

        def checked(work: asyncio.Future) -> None:
            if answer.cancelled():  # the connection went away meanwhile
                return
            if work.cancelled():  # the broker is stopping
                answer.cancel()
                return
            exc = work.exception()
            if exc is None:
                answer.set_result(self._after_sasl(api_key, check.finish(work.result())))
                return
            if isinstance(exc, BrokenProcessPool):  # a worker died: new ones for the next
                workers.replace_broken(generation)
            answer.set_exception(exc)  # this connection closes; its client retries

        generation = workers.generation
        workers.run(check.run).add_done_callback(checked)
        return answer

    def _after_sasl(self, api_key: int, result: dict) -> dict:
        assert self.sasl is not None
        if self.sasl.state is sasl.State.FAILED:
            self.closing = True
        elif self.sasl.authenticated and api_key == schemas.SASL_AUTHENTICATE.key:
            self.max_frame = self.server.config.max_frame_bytes
            if self._auth_timer is not None:
                self._auth_timer.cancel()
            # Kafka's principal for a SASL login: User:<name>; what ACLs name.
            self._caller = self._caller._replace(principal=f"User:{self.sasl.user}")
            log.info("broker.authenticated", peer=str(self.peer), user=self.sasl.user,
                     mechanism=self.sasl.mechanism)
        return result

    def _respond(self, header_flexible: bool, corr: int, schema: Schema | None, version: int,
                 result) -> None:
        entry = PendingResponse(header_flexible, corr, schema, version, result)
        if isinstance(result, asyncio.Future):
            self.pending.append(entry)
            result.add_done_callback(self._on_future_done)
            return
        if self.pending:
            self.pending.append(entry)
            return
        self._write(entry, result)

    def _on_future_done(self, fut: asyncio.Future) -> None:
        if self.closed:
            return
        while self.pending:
            entry = self.pending[0]
            result = entry.result
            if isinstance(result, asyncio.Future):
                if not result.done():
                    return
                if result.cancelled():
                    self.pending.popleft()
                    continue
                exc = result.exception()
                if exc is not None:
                    log.error("broker.handler_failed", error=repr(exc))
                    self.close("handler failed", error=repr(exc))
                    return
                result = result.result()
            self.pending.popleft()
            self._write(entry, result)
        if self.closing:
            self._close_after_answer()

    def _write(self, entry: PendingResponse, body: dict) -> None:
        schema, version = entry.schema, entry.version
        if schema is None:
            self._write_raw_token(body)
            return
        w = Writer()
        w.parts.append(b"\0\0\0\0")
        w.int32(entry.correlation_id)
        if entry.header_flexible:
            w.uvarint(0)
        encode_struct(schema.response, w, version, schema.flexible(version), body,
                      schema.name + "Response", self.strict)
        w.parts[0] = _SIZE.pack(sum(map(len, w.parts)) - 4)
        self._send(b"".join(w.parts))

    def _write_raw_token(self, body: dict) -> None:
        """A v0 SASL answer: the token alone, size-prefixed. A failure has no frame in
        v0: the client learns it from the close that follows."""
        if body["error_code"] != errors.NONE:
            return
        token = bytes(body["auth_bytes"])
        self._send(_SIZE.pack(len(token)) + token)

    def _send(self, data: bytes) -> None:
        """One whole answer frame: counted, then corked or written."""
        if self.server.metrics is not None:
            self.server.metrics.bytes_out += len(data)
        if self._corked is not None:
            self._corked.append(data)
        elif self.transport is not None and not self.closed:
            self.transport.write(data)
