"""Kafka's ``queued.max.request.bytes``: the bytes of large requests being received, all
connections together, are capped.

A request frame is buffered until it is whole. Small ones (``SMALL_FRAME`` or less) cost
little and pass; a larger one first takes its announced size from this pool, and a
connection that cannot have it is not read from until requests being received by others
are done and give theirs back (first come, first served). So a client that announces a
100 MiB produce and sends it a byte a minute holds 100 MiB of the pool, not of each
connection: with the per-API frame limits (``wire.request_limits``) the request buffers
of every connection together stay within the pool plus ``SMALL_FRAME`` per connection.
"""

from __future__ import annotations

from collections import deque
from typing import Protocol

SMALL_FRAME = 64 * 1024


class PoolWaiter(Protocol):
    def pool_granted(self) -> None:
        """The bytes asked for are reserved: read on."""


class RequestPool:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self._waiting: deque[tuple[PoolWaiter, int]] = deque()

    def reserve(self, who: PoolWaiter, nbytes: int) -> bool:
        """Take ``nbytes`` now (True) or queue for them (False: ``pool_granted`` later)."""
        if not self._waiting and self.used + nbytes <= self.limit:
            self.used += nbytes
            return True
        self._waiting.append((who, nbytes))
        return False

    def release(self, nbytes: int) -> None:
        self.used = max(self.used - nbytes, 0)
        while self._waiting and self.used + self._waiting[0][1] <= self.limit:
            who, n = self._waiting.popleft()
            self.used += n
            who.pool_granted()

    def forget(self, who: PoolWaiter) -> None:
        """``who`` went away while waiting."""
        self._waiting = deque(w for w in self._waiting if w[0] is not who)
