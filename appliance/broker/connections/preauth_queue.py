"""Requests of connections that have not authenticated yet wait their turn here.

The event loop handles, in each iteration, every socket that became readable. A login
flood (hundreds of connections, each handshaking, authenticating and closing) would thus
put hundreds of SASL exchanges between a logged-in client's request and its answer. Its
requests instead go into this queue, and each loop iteration works on it for at most
``BUDGET_S`` (at least one request); the rest waits for the next iteration, so a request
of an authenticated connection waits behind that much login work at most. A connection
with a waiting request is not read from (the server pauses it), so a flood costs memory
for one request per connection at most, and connections are capped per IP.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from typing import Protocol

BUDGET_S = 0.0002


class Waiting(Protocol):
    def run_deferred(self) -> bool:
        """Handle one waiting request; True if this connection has more waiting."""


class PreAuthQueue:
    def __init__(self) -> None:
        self._waiting: deque[Waiting] = deque()
        self._scheduled = False

    def __len__(self) -> int:
        return len(self._waiting)

    def submit(self, conn: Waiting) -> None:
        self._waiting.append(conn)
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._run)

    def _run(self) -> None:
        self._scheduled = False
        deadline = time.perf_counter() + BUDGET_S
        while self._waiting:
            conn = self._waiting.popleft()
            if conn.run_deferred():
                self._waiting.append(conn)  # its next request waits behind the others
            if time.perf_counter() >= deadline:
                break
        if self._waiting:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._run)
