"""A connection's responses: written in the order of their requests, whole or streamed.

Kafka clients match responses to requests by order as much as by correlation id, so a
response leaves only after every one before it. Most answers are ready at once; a long
poll (a fetch waiting for records) or a PLAIN password check is an ``asyncio.Future``,
and the answers behind it wait in ``pending`` until it completes, whatever order the
futures complete in. A future that fails costs the connection (``Answering.answer_failed``);
one cancelled (the broker stopping) is skipped.

Writing: a response is encoded and written whole, unless it is large or carries record
bytes from segment files (``FileRange``); then its parts go out one after the other, each
when the socket has taken the last (``write_high`` bytes at most left in the transport),
record bytes a chunk at a time, never copied whole. In ``--max-in-flight-requests 0``
mode, answers to requests that arrived in one chunk are corked and leave in one send().
When nothing is left to write, the owner hears ``all_sent``: the next request may be read.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from appliance.broker.connections.framing import SIZE
from appliance.broker.storage.segment_file import FileRange
from appliance.broker.wire import errors
from appliance.broker.wire.codec import Schema, Writer
from appliance.broker.wire.codegen import encode_struct
from appliance.logs import get_logger

log = get_logger("appliance.broker")


@dataclass(slots=True)
class PendingResponse:
    """A response waiting its turn: ``result`` is the body, or a Future of it (long poll).
    ``schema`` None: a bare SASL token (after SaslHandshake v0), not a Kafka response."""

    header_flexible: bool
    correlation_id: int
    schema: Schema | None
    version: int
    result: Any


class Answering(Protocol):
    closed: bool

    def all_sent(self) -> None:
        """Everything written so far is in the kernel, nothing is pending."""

    def no_answer(self) -> None:
        """A request is done without a response frame (a failed v0 SASL token)."""

    def answer_failed(self, exc: BaseException) -> None:
        """A pending response's future failed: the connection closes."""

    def answers_flushed(self) -> None:
        """A completed future let the answers before and behind it leave."""


class ResponseQueue:
    def __init__(self, owner: Answering, strict: bool, write_high: int, stream_run: int,
                 count_out: Callable[[int], None] | None = None) -> None:
        self.owner = owner
        self.strict = strict  # strict encoding: missing or unknown keys raise
        self.write_high = write_high
        self.stream_run = stream_run
        self.count_out = count_out  # bytes written, for broker_bytes_out
        self.transport: asyncio.Transport | None = None
        self.pending: deque[PendingResponse] = deque()
        self.write_paused = False  # the transport holds unsent bytes
        self._out: deque[bytes | FileRange] = deque()  # a response being streamed
        self._corked: list[bytes] | None = None  # responses held to leave in one send()

    @property
    def in_progress(self) -> bool:
        """A response waits for its future or is still being written."""
        return bool(self.pending or self._out)

    def respond(self, header_flexible: bool, corr: int, schema: Schema | None, version: int,
                result: Any) -> None:
        entry = PendingResponse(header_flexible, corr, schema, version, result)
        if isinstance(result, asyncio.Future):
            self.pending.append(entry)
            result.add_done_callback(self._on_future_done)
            return
        if self.pending:
            self.pending.append(entry)
            return
        self._write(entry, result)

    def cork(self) -> None:
        """Hold whole answers until ``uncork`` (pipelined requests of one chunk)."""
        self._corked = []

    def uncork(self) -> None:
        corked, self._corked = self._corked, None
        if corked and not self.owner.closed:
            self._send(corked[0] if len(corked) == 1 else b"".join(corked))

    def resume(self) -> None:
        """The transport took its buffer down: write on, or report all sent."""
        if self._out:
            self._pump()
        else:
            self._sent()

    def drop(self) -> None:
        """The connection is closing: unsent output is dropped, files let go."""
        for part in self._out:
            if isinstance(part, FileRange):
                part.done()
        self._out.clear()

    def cancel_pending(self) -> None:
        """The connection is gone: the futures still awaited are cancelled."""
        for entry in self.pending:
            result = entry.result
            if isinstance(result, asyncio.Future) and not result.done():
                result.cancel()
        self.pending.clear()

    def _on_future_done(self, fut: asyncio.Future) -> None:
        if self.owner.closed:
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
                    self.owner.answer_failed(exc)
                    return
                result = result.result()
            self.pending.popleft()
            self._write(entry, result)
        self.owner.answers_flushed()

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
        w.parts[0] = SIZE.pack(total - 4)
        if total > self.write_high or any(isinstance(part, FileRange) for part in w.parts):
            self._stream(w.parts)  # out a piece at a time, never copied whole
        else:
            self._send(b"".join(w.parts))

    def _write_raw_token(self, body: dict) -> None:
        """A v0 SASL answer: the token alone, size-prefixed. A failure has no frame in
        v0: the client learns it from the close that follows."""
        if body["error_code"] != errors.NONE:
            self.owner.no_answer()
            return
        token = bytes(body["auth_bytes"])
        self._send(SIZE.pack(len(token)) + token)

    def _send(self, data: bytes) -> None:
        """Whole answer frames: behind a response still streaming, else corked, else
        written."""
        if self._out:
            self._out.append(data)
        elif self._corked is not None:
            self._corked.append(data)
        elif self.transport is not None and not self.owner.closed:
            self._transport_write(data)
            if not self.write_paused:
                self._sent()

    def _transport_write(self, data: bytes) -> None:
        if self.count_out is not None:
            self.count_out(len(data))
        assert self.transport is not None
        self.transport.write(data)

    def _stream(self, parts: list) -> None:
        """A large response: its parts go out one after the other (small ones joined up to
        ``stream_run``; record bytes from segment files a chunk at a time), each when the
        socket has taken the last. The stored batches it sends are referenced, not
        copied, so a client that does not read costs its connection ``write_high``."""
        if self._corked:  # answers before it leave first
            self._out.append(b"".join(self._corked))
            self._corked.clear()
        run: list = []
        run_bytes = 0
        for part in parts:
            if isinstance(part, FileRange) or len(part) >= self.stream_run:
                if run:
                    self._out.append(b"".join(run))
                    run, run_bytes = [], 0
                self._out.append(part)
                continue
            run.append(part)
            run_bytes += len(part)
            if run_bytes >= self.stream_run:
                self._out.append(b"".join(run))
                run, run_bytes = [], 0
        if run:
            self._out.append(b"".join(run))
        self._pump()

    def _pump(self) -> None:
        while self._out and not self.write_paused and not self.owner.closed:
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
        if not self._out and not self.write_paused and not self.owner.closed:
            self._sent()

    def _sent(self) -> None:
        if not self._out and not self.pending:
            self.owner.all_sent()
