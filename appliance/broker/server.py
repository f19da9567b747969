"""The TCP side: the listeners, and each connection wiring its pieces together.

A ``Connection`` is asyncio's protocol for one client; the work is done by the pieces in
``connections/``: ``framing`` (frames and their caps), ``dispatch`` (header checks and
the handler), ``auth_steps`` (SASL), ``responses`` (answers in request order, streamed)
and ``read_gate`` (why reading is paused). What the connection itself keeps are the rules
that tie them together, below.

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
import time
from collections import deque
from typing import cast

from appliance.broker.apis import Apis
from appliance.broker.broker_metrics import BrokerMetrics
from appliance.broker.caller import Caller
from appliance.broker.connections.auth_steps import AuthSteps
from appliance.broker.connections.cap import ConnectionCap, effective_total
from appliance.broker.connections.dispatch import RequestDispatch
from appliance.broker.connections.framing import Framer
from appliance.broker.connections.preauth_queue import PreAuthQueue
from appliance.broker.connections.rate import THROTTLED_CLOSE_S, ConnectionRate
from appliance.broker.connections.read_gate import ReadGate
from appliance.broker.connections.request_pool import RequestPool
from appliance.broker.connections.responses import ResponseQueue
from appliance.broker.memory_bound import STREAM_RUN, WRITE_HIGH, WRITE_LOW
from appliance.broker.security import listener, sasl
from appliance.broker.security.password_pool import PasswordWorkers
from appliance.broker.settings import BrokerConfig
from appliance.broker.storage.log_cleaner import LogCleaner
from appliance.broker.storage.segments import Storage
from appliance.broker.storage.topic_registry import TopicRegistry
from appliance.broker.wire.codegen import strict_from_env
from appliance.broker.wire.request_limits import RequestLimits
from appliance.logs import get_logger

log = get_logger("appliance.broker")
ACCEPT_RETRY_S = 0.1  # after a failed accept (descriptors exhausted): do not spin
IDLE_CHECK_MAX_S = 30.0  # idle connections are looked for at least this often


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


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
    """One client connection: asyncio's callbacks wired to the pieces that do the work
    (``connections.framing``, ``dispatch``, ``auth_steps``, ``responses``, ``read_gate``)
    and the rules that tie them: one request at a time, closing after a failed login's
    answer, the pre-auth queue, the caps it is counted in, idleness."""

    def __init__(self, server: BrokerServer, admitted_ip: str | None = None) -> None:
        self.server = server
        self.admitted_ip = admitted_ip  # TLS listeners: the cap and rate let it in on accept
        self.made = False  # connection_made ran (TLS: the handshake finished)
        self.transport: asyncio.Transport | None = None
        self.peer = None
        self.ip: str | None = None  # counted by the server's ConnectionCap while open
        self.gate = ReadGate()
        limits = server.request_limits
        session = server.security.new_session()
        # SASL listeners: nothing but the handshake until authenticated (sasl.py)
        self.auth = AuthSteps(session, server.password_checks,
                              server.config.auth_timeout_ms, self._logged_in)
        self.framer = Framer(limits, server.request_pool, self.gate,
                             limits.largest_frame if session is None else
                             min(limits.largest_frame, sasl.UNAUTHENTICATED_MAX_FRAME))
        metrics = server.metrics
        self.responses = ResponseQueue(self, server.strict_encoding, WRITE_HIGH, STREAM_RUN,
                                       self._count_out if metrics is not None else None)
        self.dispatch = RequestDispatch(server.apis.handlers, Apis.api_version_list,
                                        limits.max_items, self.auth, self.responses, self,
                                        metrics)
        self._close_timer: asyncio.TimerHandle | None = None
        self._deferred: deque[memoryview] = deque()  # requests in the server's PreAuthQueue
        # One request at a time (Kafka's rule): ``busy`` from reading a request until its
        # response is in the kernel; reading stops meanwhile.
        self.one_at_a_time = server.config.max_in_flight_requests == 1
        self.busy = False
        self._parsing = False
        self.last_active = time.monotonic()

    @property
    def closed(self) -> bool:
        return self.gate.shut

    @closed.setter
    def closed(self, value: bool) -> None:
        self.gate.shut = value

    @property
    def closing(self) -> bool:
        """Answered an auth failure: close once the answer is sent."""
        return self.auth.failed

    # -- asyncio callbacks ----------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.made = True
        self.transport = transport  # type: ignore[assignment]
        self.gate.transport = self.responses.transport = self.transport
        self.peer = self.dispatch.peer = transport.get_extra_info("peername")
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
            self.gate.pause("closed")
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
        self.dispatch.caller = Caller("", ip)
        self.server.connections.add(self)
        if self.server.metrics is not None:
            self.server.metrics.connections_opened += 1
        # TLS (if any) is up: SASL must now finish within the auth timeout.
        self.auth.start_clock(self.peer, self._auth_timeout)

    def close_quietly(self) -> None:
        """Close without a log line (the caller logged why)."""
        self.closed = True
        self.framer.buf.clear()
        self.responses.drop()
        if self.transport is not None:
            self.transport.abort()
        self._release()

    def _release(self) -> None:
        if self.ip is not None:
            self.server.connection_cap.release(self.ip)
            self.ip = None
        self.framer.release()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._release()
        self.responses.drop()
        self.auth.stop_clock()
        if self._close_timer is not None:
            self._close_timer.cancel()
        self.server.connections.discard(self)
        self.responses.cancel_pending()
        if self.framer.buf:
            log.info("broker.client_disconnected_mid_request", peer=str(self.peer),
                     buffered_bytes=len(self.framer.buf))

    def pause_writing(self) -> None:
        self.responses.write_paused = True
        self.gate.pause("write")

    def resume_writing(self) -> None:
        self.responses.write_paused = False
        if self.closed:
            return
        self.gate.resume("write")
        self.responses.resume()

    def idle_for(self, now: float) -> float:
        """Seconds without traffic, 0 while a request is in progress."""
        if self.busy or self.responses.in_progress or self._deferred:
            return 0.0
        return now - self.last_active

    # -- reading requests -------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        if self.closed:  # held off (over the creation rate) or closing: never read
            self.gate.pause("closed")
            return
        self.last_active = time.monotonic()
        if self.server.metrics is not None:
            self.server.metrics.bytes_in += len(data)
        chunk = self.framer.received(data)
        if chunk is not None:
            self._parse(chunk)

    def _parse(self, data: bytes) -> None:
        # In --max-in-flight-requests 0 mode, responses to requests that arrived together
        # leave together: one send() syscall instead of one per pipelined request.
        if not self.one_at_a_time:
            self.responses.cork()
        self._parsing = True
        try:
            pos = self.framer.split(data, self)
        finally:
            self._parsing = False
            self.responses.uncork()
            if self.closing and not self.closed and not self.responses.pending \
                    and not self.busy:
                self._close_after_answer()  # else once the answers before it are out
        if pos < len(data) and not self.closed:
            self.framer.keep(memoryview(data)[pos:])
            if self.busy:
                self.gate.pause("busy")
            else:
                self.framer.frame_waiting()  # checks and reserves for the partial frame

    # FrameSink: what the framer hands on

    def wants_frame(self) -> bool:
        return not self.busy

    def take_frame(self, frame: memoryview) -> bool:
        if self.one_at_a_time:
            self.busy = True
        try:
            self._on_frame(frame)
        except Exception as exc:  # a bug must cost one connection, never the broker
            log.exception("broker.internal_error", peer=str(self.peer))
            self.close("internal error", error=repr(exc))
            return False
        return not (self.closed or self.closing)

    def refuse_frame(self, reason: str, **fields: int) -> None:
        self.close(reason, **fields)

    def request_done(self) -> None:
        """The response is in the kernel (or there is none): read the next request."""
        if not self.one_at_a_time or not self.busy:
            return
        self.busy = False
        if self.closing and not self.closed:
            self._close_after_answer()
            return
        self.gate.resume("busy")
        if self.framer.buf and not self._parsing:
            asyncio.get_running_loop().call_soon(self._parse_buffered)

    def _parse_buffered(self) -> None:
        if self.closed or self.busy or not self.framer.buf:
            return
        data = self.framer.take_buffered()
        if data is not None:
            self._parse(data)

    # -- closing ------------------------------------------------------------------------

    def close(self, reason: str, **fields) -> None:
        if not self.closed:
            log.warning("broker.connection_closed", peer=str(self.peer), reason=reason, **fields)
            self.close_quietly()

    def _auth_timeout(self) -> None:
        self.close("authentication timed out", timeout_ms=self.server.config.auth_timeout_ms)

    def _close_after_answer(self) -> None:
        """Read nothing more, then close gracefully after the configured delay: the failure
        answer already written reaches the client, and is read before the close."""
        session = self.auth.session
        log.warning("broker.authentication_failed", peer=str(self.peer),
                    mechanism=session.mechanism if session else None,
                    reason=session.failure if session else None)
        self.closed = True
        self.framer.buf.clear()
        if self.transport is None:
            return
        self.transport.pause_reading()  # what the client still sends is never read
        self.auth.stop_clock()
        delay_s = self.server.config.failed_auth_close_delay_ms / 1000.0
        if delay_s <= 0:
            self.transport.close()
        else:
            self._close_timer = asyncio.get_running_loop().call_later(
                delay_s, self.transport.close)

    # -- authentication -------------------------------------------------------------------

    def _logged_in(self, user: str | None) -> None:
        self.framer.max_frame = self.server.request_limits.largest_frame
        self.dispatch.logged_in(user)

    def _on_frame(self, frame: memoryview) -> None:
        if self._deferred or self.auth.waiting:
            self._defer(frame)
        else:
            self.dispatch.handle(frame)

    def _defer(self, frame: memoryview) -> None:
        """Not authenticated yet: the request waits its turn, and nothing more is read."""
        if not self._deferred:
            self.server.preauth.submit(self)
            self.gate.pause("preauth")
        self._deferred.append(frame)

    def run_deferred(self) -> bool:
        """The PreAuthQueue's turn: handle one waiting request; True if more wait."""
        if self.closed or not self._deferred:
            self._deferred.clear()
            return False
        try:
            self.dispatch.handle(self._deferred.popleft())
        except Exception as exc:  # a bug must cost one connection, never the broker
            log.exception("broker.internal_error", peer=str(self.peer))
            self.close("internal error", error=repr(exc))
        if self.closed or self.closing:
            self._deferred.clear()
            if self.closing and not self.closed and not self.responses.pending \
                    and not self.busy:
                self._close_after_answer()
            return False
        if self._deferred:
            return True
        self.gate.resume("preauth")
        if self.framer.buf and not self.busy:
            asyncio.get_running_loop().call_soon(self._parse_buffered)
        return False

    # -- Answering: what the response queue reports ---------------------------------------

    def all_sent(self) -> None:
        self.last_active = time.monotonic()
        self.request_done()

    def no_answer(self) -> None:
        self.request_done()

    def answer_failed(self, exc: BaseException) -> None:
        log.error("broker.handler_failed", error=repr(exc))
        self.close("handler failed", error=repr(exc))

    def answers_flushed(self) -> None:
        if self.closing and not self.busy:
            self._close_after_answer()

    def _count_out(self, nbytes: int) -> None:
        assert self.server.metrics is not None
        self.server.metrics.bytes_out += nbytes
