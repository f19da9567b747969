"""Request frames out of a connection's byte stream, and the limits on them.

Kafka frames each request with its size (a big-endian int32). Bytes arrive in chunks that
split and merge frames arbitrarily; the ``Framer`` hands each whole frame on in place (a
memoryview, no copy) and buffers a partial one. Before a frame is buffered its announced
size is checked, so a client cannot make the broker hold more than the limits allow:

- the frame cap (``max_frame``: Kafka's ``socket.request.max.bytes``, lower before SASL
  authentication, ``security.sasl.UNAUTHENTICATED_MAX_FRAME``);
- the per-API cap (``wire.request_limits``), known once the api key's two bytes are in;
- past ``SMALL_FRAME``, the broker-wide request pool (``request_pool``): the frame's size
  is taken from it before more is read, and given back once the frame is whole; a
  connection that must wait is paused (``ReadGate``, reason ``pool``).

A frame over a cap is refused (``FrameSink.refuse_frame``: the connection closes, naming
the cap). What happens to a whole frame, and when the next may be taken, is the sink's.
"""

from __future__ import annotations

import struct
from typing import NamedTuple, Protocol

from appliance.broker.connections.read_gate import ReadGate
from appliance.broker.connections.request_pool import SMALL_FRAME, RequestPool
from appliance.broker.wire.request_limits import RequestLimits

SIZE = struct.Struct(">i")  # a frame's size prefix; also a response's
_API_KEY = struct.Struct(">h")
POOL = "pool"  # the ReadGate reason while waiting for request-pool bytes


class Refusal(NamedTuple):
    reason: str  # the close's reason, as logged (``broker.connection_closed``)
    fields: dict[str, int]


class FrameSink(Protocol):
    def wants_frame(self) -> bool:
        """May a frame be taken now (one request at a time: none while one is in flight)."""

    def take_frame(self, frame: memoryview) -> bool:
        """Handle one whole request frame (without its size); False: take no more from
        this chunk (the connection closed or is closing)."""

    def refuse_frame(self, reason: str, **fields: int) -> None:
        """A frame over a limit: the connection closes."""


class Framer:
    def __init__(self, limits: RequestLimits, pool: RequestPool, gate: ReadGate,
                 max_frame: int) -> None:
        self.limits = limits
        self.pool = pool
        self.gate = gate
        self.max_frame = max_frame
        self.buf = bytearray()  # a partial frame (or frames not yet taken)
        self._reserved = 0  # pool bytes held for the frame being received
        self._asked = 0  # pool bytes waited for (0: not waiting)

    def received(self, data: bytes) -> bytes | None:
        """The bytes to split now, or None while the buffered frame is still short."""
        if not self.buf:
            return data
        self.buf += data  # a partial frame is pending: join once, then split from bytes
        return self.take_buffered()

    def take_buffered(self) -> bytes | None:
        """The buffered bytes, if they hold a whole frame (or one to refuse), else None."""
        if not self.frame_waiting():
            return None
        data = bytes(self.buf)
        self.buf.clear()
        return data

    def split(self, data: bytes, sink: FrameSink) -> int:
        """Hand the whole frames in ``data`` to ``sink`` while it wants them; returns where
        the rest starts (``len(data)`` after a refusal: nothing more is read)."""
        view = memoryview(data)
        pos, n = 0, len(data)
        while n - pos >= 4 and sink.wants_frame():
            refusal = self._refusal(data, pos, n)
            if refusal is not None:
                sink.refuse_frame(refusal.reason, **refusal.fields)
                return n
            size = SIZE.unpack_from(data, pos)[0]
            if n - pos - 4 < size:
                break
            self.give_back()  # the frame it was reserved for is whole
            go_on = sink.take_frame(view[pos + 4:pos + 4 + size])
            pos += 4 + size
            if not go_on:
                break
        return pos

    def keep(self, rest: memoryview) -> None:
        """Bytes not taken yet: they wait in the buffer."""
        self.buf += rest

    def frame_waiting(self) -> bool:
        """Does the buffer hold a whole frame (or one that must be refused)? Checks a
        partial frame's announced size and reserves request-pool bytes for it."""
        if len(self.buf) < 4:
            return False
        size = SIZE.unpack_from(self.buf, 0)[0]
        if len(self.buf) - 4 >= size or self._refusal(self.buf, 0, len(self.buf)):
            return True
        if size > SMALL_FRAME and not self._reserved and not self._asked:
            if self.pool.reserve(self, size):
                self._reserved = size
            else:
                self._asked = size
                self.gate.pause(POOL)
        # Still short of the frame: copying the whole buffer to parse nothing would make
        # a big frame sent in small pieces cost O(n^2).
        return False

    def _refusal(self, data: bytes | bytearray, pos: int, n: int) -> Refusal | None:
        size = SIZE.unpack_from(data, pos)[0]
        if size < 0 or size > self.max_frame:
            return Refusal("frame size out of range",
                           {"frame_size": size, "max_frame_bytes": self.max_frame})
        if n - pos >= 6:
            api_key = _API_KEY.unpack_from(data, pos + 4)[0]
            limit = self.limits.frame_bytes(api_key)
            if size > limit:
                return Refusal("request frame over its API's limit",
                               {"api_key": api_key, "frame_size": size, "limit_bytes": limit})
        return None

    def pool_granted(self) -> None:
        """The pool reserved what this connection waited for (``request_pool.PoolWaiter``)."""
        asked, self._asked = self._asked, 0
        if self.gate.shut:  # closed meanwhile: the bytes go back at once
            self.pool.release(asked)
            return
        self._reserved = asked
        self.gate.resume(POOL)

    def give_back(self) -> None:
        if self._reserved:
            self.pool.release(self._reserved)
            self._reserved = 0

    def release(self) -> None:
        """The connection is gone: its pool bytes go back, its wait is dropped."""
        self.give_back()
        if self._asked:
            self.pool.forget(self)
            self._asked = 0
