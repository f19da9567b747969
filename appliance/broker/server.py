"""The TCP side: framing, header parsing, dispatch, and responses per connection.

One request at a time per connection, as Kafka: once a request is read, nothing more is
read from its connection until its response has been handed to the kernel whole (a
long-polling fetch holds its connection until it is answered; "handed to the kernel": the
transport holds at most ``WRITE_HIGH`` of it). What one connection costs
is then bounded: one request frame being received (limited per API,
``wire.request_limits``, and past ``SMALL_FRAME`` drawn from the broker-wide request pool,
``connections.request_pool``), one request decoded, one response being sent. A response's
record bytes from segment files are streamed from the file a chunk at a time while the
socket takes them (``FileRange``), never held whole. (``--max-in-flight-requests 0`` lifts
the rule for the bench's comparison: requests are then read as they arrive and answered
in order, the way this broker worked before.)

Nothing one client does may stall the others on the one event loop: a connection over the
per-IP or broker-wide cap is closed when accepted, before its TLS handshake (the listener
accepts plain TCP and starts TLS itself, for that reason); requests of connections that
have not authenticated wait in a queue worked on for a bounded time per loop iteration
(``connections.preauth_queue``); SASL/PLAIN passwords are checked in worker processes
(``security.password_pool``); a connection idle for ``connections.max.idle.ms`` is
closed.
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
from appliance.broker.connections.cap import ConnectionCap, effective_total
from appliance.broker.connections.preauth_queue import PreAuthQueue
from appliance.broker.connections.rate import THROTTLED_CLOSE_S, ConnectionRate
from appliance.broker.connections.request_pool import SMALL_FRAME, RequestPool
from appliance.broker.memory_bound import STREAM_RUN, WRITE_HIGH, WRITE_LOW
from appliance.broker.security import listener, sasl
from appliance.broker.security.password_pool import PasswordWorkers
from appliance.broker.settings import BrokerConfig
from appliance.broker.storage.log_cleaner import LogCleaner
from appliance.broker.storage.segment_file import FileRange
from appliance.broker.storage.segments import Storage
from appliance.broker.storage.topic_registry import TopicRegistry
from appliance.broker.wire import errors, schemas
from appliance.broker.wire.codec import DecodeError, Reader, Schema, Writer
from appliance.broker.wire.codegen import decode_struct, encode_struct, strict_from_env
from appliance.broker.wire.request_limits import RequestLimits
from appliance.logs import get_logger

log = get_logger("appliance.broker")
_SIZE = struct.Struct(">i")
_API_KEY = struct.Struct(">h")
ACCEPT_RETRY_S = 0.1  # after a failed accept (descriptors exhausted): do not spin
IDLE_CHECK_MAX_S = 30.0  # idle connections are looked for at least this often


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
    def __init__(self, config: BrokerConfig, metrics: BrokerMetrics | None = None,
                 open_files: int = 1 << 20) -> None:
        self.config = config
        self.metrics = metrics  # counters for --metrics-port; None: nothing counted
        self.security = listener.from_config(config)  # ListenerError: unusable TLS/SASL
        self.storage = Storage(config) if config.data_dir else None
        self.registry = TopicRegistry(config, self.storage)
        self.registry.recover()
        self.cleaner = LogCleaner(self.registry)
        for name, count in config.initial_topics.items():
            if name not in self.registry.topics:
                self.registry.create(name, count)
        self.apis = Apis(config, self.registry, self.storage,
                         listener.managed_users(config, self.security))
        self._server: asyncio.base_events.Server | None = None  # plain listeners
        self._tls_listener: socket.socket | None = None  # TLS listeners accept themselves
        self._accept_task: asyncio.Task | None = None
        self._handshakes: set[asyncio.Task] = set()
        self._retention_timer: asyncio.TimerHandle | None = None
        self.connections: set[Connection] = set()
        self.max_connections = effective_total(config.max_connections, open_files)
        self.connection_cap = ConnectionCap(config.max_connections_per_ip,
                                            self.max_connections)
        self.request_limits = RequestLimits.from_config(config)
        self.request_pool = RequestPool(config.queued_max_request_bytes)
        self._idle_timer: asyncio.TimerHandle | None = None
        self.idle_closed = 0  # connections closed for connections.max.idle.ms
        self._next_group_expiry = 0.0  # monotonic: when empty groups are looked at next
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
        self._schedule_idle_check()
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
            freed = self.registry.enforce_retention()
            if freed:
                log.info("broker.retention", freed_bytes=freed)
            self.cleaner.tick(asyncio.get_running_loop())
            self.apis.txn_coordinator.abort_expired(int(time.time() * 1000))
            now = time.monotonic()
            if now >= self._next_group_expiry:
                self.apis.coordinator.expire_groups()
                self._next_group_expiry = now + min(
                    self.config.offsets_retention_check_ms,
                    self.config.offsets_retention_ms / 2) / 1000.0
        except Exception:
            log.exception("broker.retention_failed")
        self._schedule_retention()

    def _schedule_idle_check(self) -> None:
        idle_ms = self.config.connections_max_idle_ms
        if idle_ms <= 0:
            return
        every = min(idle_ms / 1000.0 / 4, IDLE_CHECK_MAX_S)
        self._idle_timer = asyncio.get_running_loop().call_later(every, self._idle_check)

    def _idle_check(self) -> None:
        """Close connections idle for ``connections.max.idle.ms`` (Kafka's: nothing read
        or written, no request in progress)."""
        limit_s = self.config.connections_max_idle_ms / 1000.0
        now = time.monotonic()
        closed = 0
        for conn in list(self.connections):
            if not conn.closed and conn.idle_for(now) > limit_s:
                conn.close_quietly()
                closed += 1
        self.idle_closed += closed
        if closed:
            log.info("broker.idle_connections_closed", connections=closed,
                     idle_ms=self.config.connections_max_idle_ms)
        self._schedule_idle_check()

    async def stop(self) -> None:
        for timer in (self._retention_timer, self._idle_timer):
            if timer is not None:
                timer.cancel()
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
        self.cleaner.shutdown()
        if self.storage is not None:
            self.storage.close(self.registry.producer_snapshots())
        self.apis.offsets.close()
        self.apis.slicer.shutdown()
        if self.password_checks is not None:
            self.password_checks.shutdown()


class Connection(asyncio.Protocol):
    def __init__(self, server: BrokerServer, admitted_ip: str | None = None) -> None:
        self.server = server
        self.admitted_ip = admitted_ip  # TLS listeners: the cap and rate let it in on accept
        self.made = False  # connection_made ran (TLS: the handshake finished)
        self.apis = server.apis
        self.limits = server.request_limits
        self.max_frame = self.limits.largest_frame
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
        # One request at a time (Kafka's rule): ``busy`` from reading a request until its
        # response is in the kernel; reading stops meanwhile.
        self.one_at_a_time = server.config.max_in_flight_requests == 1
        self.busy = False
        self._parsing = False
        self._out: deque[bytes | FileRange] = deque()  # a response being streamed
        self._write_paused = False  # the transport holds unsent bytes
        self._no_read: set[str] = set()  # why reading is paused (busy, pool, write, ...)
        self._reserved = 0  # request-pool bytes held for the frame being received
        self._pool_waiting = False
        self.last_active = time.monotonic()

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
            self._pause("closed")
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
        # pause_writing once WRITE_HIGH bytes are left unsent, resume_writing below
        # WRITE_LOW: a response counts as sent (the next request may be read) once no more
        # than that is left in the transport, so that is all one connection holds of it.
        cast(asyncio.Transport, transport).set_write_buffer_limits(high=WRITE_HIGH,
                                                                   low=WRITE_LOW)
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

    def _pause(self, reason: str) -> None:
        self._no_read.add(reason)
        try:
            cast(asyncio.Transport, self.transport).pause_reading()
        except (AttributeError, RuntimeError):  # closing already, or no transport
            pass

    def _unpause(self, reason: str) -> None:
        self._no_read.discard(reason)
        if not self._no_read and not self.closed and self.transport is not None:
            try:
                self.transport.resume_reading()
            except RuntimeError:
                pass

    def close_quietly(self) -> None:
        """Close without a log line (the caller logged why)."""
        self.closed = True
        self.buf.clear()
        self._drop_output()
        if self.transport is not None:
            self.transport.abort()
        self._release()

    def _release(self) -> None:
        if self.ip is not None:
            self.server.connection_cap.release(self.ip)
            self.ip = None
        self._give_back_pool()
        if self._pool_waiting:
            self.server.request_pool.forget(self)
            self._pool_waiting = False

    def _drop_output(self) -> None:
        for part in self._out:
            if isinstance(part, FileRange):
                part.done()
        self._out.clear()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._release()
        self._drop_output()
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
        self._write_paused = True
        self._pause("write")

    def resume_writing(self) -> None:
        self._write_paused = False
        if self.closed:
            return
        self._unpause("write")
        if self._out:
            self._pump()
        else:
            self._sent()

    def idle_for(self, now: float) -> float:
        """Seconds without traffic, 0 while a request is in progress."""
        if self.busy or self.pending or self._out or self._deferred:
            return 0.0
        return now - self.last_active

    # -- reading requests -------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        if self.closed:  # held off (over the creation rate) or closing: never read
            self._pause("closed")
            return
        self.last_active = time.monotonic()
        if self.server.metrics is not None:
            self.server.metrics.bytes_in += len(data)
        if self.buf:  # a partial frame is pending: join once, then parse from bytes
            self.buf += data
            if not self._frame_waiting():
                return
            data = bytes(self.buf)
            self.buf.clear()
        self._parse(data)

    def _frame_waiting(self) -> bool:
        """Does the buffer hold a whole frame (or one that must be refused)? Checks a
        partial frame's announced size and reserves request-pool bytes for it."""
        if len(self.buf) < 4:
            return False
        size = _SIZE.unpack_from(self.buf, 0)[0]
        if size < 0 or size > self.max_frame or len(self.buf) - 4 >= size:
            return True
        if len(self.buf) >= 6:
            api_key = _API_KEY.unpack_from(self.buf, 4)[0]
            if size > self.limits.frame_bytes(api_key):
                return True  # refused by _parse
        if size > SMALL_FRAME and not self._reserved and not self._pool_waiting:
            if self.server.request_pool.reserve(self, size):
                self._reserved = size
            else:
                self._pool_waiting = True
                self._pause("pool")
        # Still short of the frame: copying the whole buffer to parse nothing would make
        # a big frame sent in small pieces cost O(n^2).
        return False

    def pool_granted(self) -> None:
        if self.closed:
            self.server.request_pool.release(self._frame_size())
            return
        self._pool_waiting = False
        self._reserved = self._frame_size()
        self._unpause("pool")

    def _frame_size(self) -> int:
        return _SIZE.unpack_from(self.buf, 0)[0] if len(self.buf) >= 4 else 0

    def _give_back_pool(self) -> None:
        if self._reserved:
            self.server.request_pool.release(self._reserved)
            self._reserved = 0

    def _parse(self, data: bytes) -> None:
        view = memoryview(data)  # frames are parsed in place, without copying
        pos, n = 0, len(data)
        # In --max-in-flight-requests 0 mode, responses to requests that arrived together
        # leave together: one send() syscall instead of one per pipelined request.
        self._corked = None if self.one_at_a_time else []
        self._parsing = True
        try:
            pos = self._parse_frames(data, view, pos, n)
        finally:
            self._parsing = False
            corked, self._corked = self._corked, None
            if corked and not self.closed:
                self._send(corked[0] if len(corked) == 1 else b"".join(corked))
            if self.closing and not self.closed and not self.pending and not self.busy:
                self._close_after_answer()  # else once the answers before it are out
        if pos < n and not self.closed:
            self.buf += view[pos:]
            if self.busy:
                self._pause("busy")
            else:
                self._frame_waiting()  # checks and reserves for the partial frame

    def _parse_frames(self, data: bytes, view: memoryview, pos: int, n: int) -> int:
        """Handle the whole frames in ``data`` (one-at-a-time: until one is in flight);
        returns where the rest starts."""
        while n - pos >= 4:
            if self.busy:
                break
            size = _SIZE.unpack_from(data, pos)[0]
            if size < 0 or size > self.max_frame:
                self.close("frame size out of range", frame_size=size,
                           max_frame_bytes=self.max_frame)
                return n
            if n - pos >= 6:
                api_key = _API_KEY.unpack_from(data, pos + 4)[0]
                limit = self.limits.frame_bytes(api_key)
                if size > limit:
                    self.close("request frame over its API's limit", api_key=api_key,
                               frame_size=size, limit_bytes=limit)
                    return n
            if n - pos - 4 < size:
                break
            self._give_back_pool()  # the frame it was reserved for is whole
            if self.one_at_a_time:
                self.busy = True
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

    def _request_done(self) -> None:
        """The response is in the kernel (or there is none): read the next request."""
        if not self.one_at_a_time or not self.busy:
            return
        self.busy = False
        if self.closing and not self.closed:
            self._close_after_answer()
            return
        self._unpause("busy")
        if self.buf and not self._parsing:
            asyncio.get_running_loop().call_soon(self._parse_buffered)

    def _parse_buffered(self) -> None:
        if self.closed or self.busy or not self.buf:
            return
        if not self._frame_waiting():
            return
        data = bytes(self.buf)
        self.buf.clear()
        self._parse(data)

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
            self._pause("preauth")
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
            if self.closing and not self.closed and not self.pending and not self.busy:
                self._close_after_answer()
            return False
        if self._deferred:
            return True
        self._unpause("preauth")
        if self.buf and not self.busy:
            asyncio.get_running_loop().call_soon(self._parse_buffered)
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
            req = decode_struct(schema.request, r, version, flexible, schema.name + "Request",
                                self.limits.max_items)
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
            self._request_done()  # acks=0 produce: no response by protocol
            return
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
            self.max_frame = self.limits.largest_frame
            if self._auth_timer is not None:
                self._auth_timer.cancel()
            # Kafka's principal for a SASL login: User:<name>; what ACLs name.
            self._caller = self._caller._replace(principal=f"User:{self.sasl.user}")
            log.info("broker.authenticated", peer=str(self.peer), user=self.sasl.user,
                     mechanism=self.sasl.mechanism)
        return result

    # -- writing responses ------------------------------------------------------------------

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
        if self.closing and not self.busy:
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
        total = sum(map(len, w.parts))
        w.parts[0] = _SIZE.pack(total - 4)
        if total > WRITE_HIGH or any(isinstance(part, FileRange) for part in w.parts):
            self._stream(w.parts)  # out a piece at a time, never copied whole
        else:
            self._send(b"".join(w.parts))

    def _write_raw_token(self, body: dict) -> None:
        """A v0 SASL answer: the token alone, size-prefixed. A failure has no frame in
        v0: the client learns it from the close that follows."""
        if body["error_code"] != errors.NONE:
            self._request_done()
            return
        token = bytes(body["auth_bytes"])
        self._send(_SIZE.pack(len(token)) + token)

    def _send(self, data: bytes) -> None:
        """Whole answer frames: behind a response still streaming, else corked, else
        written."""
        if self._out:
            self._out.append(data)
        elif self._corked is not None:
            self._corked.append(data)
        elif self.transport is not None and not self.closed:
            self._transport_write(data)
            if not self._write_paused:
                self._sent()

    def _transport_write(self, data: bytes) -> None:
        if self.server.metrics is not None:
            self.server.metrics.bytes_out += len(data)
        assert self.transport is not None
        self.transport.write(data)

    def _stream(self, parts: list) -> None:
        """A large response: its parts go out one after the other (small ones joined up to
        ``STREAM_RUN``; record bytes from segment files a chunk at a time), each when the
        socket has taken the last. The stored batches it sends are referenced, not
        copied, so a client that does not read costs its connection ``WRITE_HIGH``."""
        if self._corked:  # answers before it leave first
            self._out.append(b"".join(self._corked))
            self._corked.clear()
        run: list = []
        run_bytes = 0
        for part in parts:
            if isinstance(part, FileRange) or len(part) >= STREAM_RUN:
                if run:
                    self._out.append(b"".join(run))
                    run, run_bytes = [], 0
                self._out.append(part)
                continue
            run.append(part)
            run_bytes += len(part)
            if run_bytes >= STREAM_RUN:
                self._out.append(b"".join(run))
                run, run_bytes = [], 0
        if run:
            self._out.append(b"".join(run))
        self._pump()

    def _pump(self) -> None:
        while self._out and not self._write_paused and not self.closed:
            part = self._out[0]
            if isinstance(part, FileRange):
                chunk = part.next_chunk()
                if chunk is None:
                    self._out.popleft()
                    continue
            else:
                chunk = part
                self._out.popleft()
            self._transport_write(chunk)
        if not self._out and not self._write_paused and not self.closed:
            self._sent()

    def _sent(self) -> None:
        """Everything written so far is in the kernel."""
        if not self._out and not self.pending:
            self.last_active = time.monotonic()
            self._request_done()
