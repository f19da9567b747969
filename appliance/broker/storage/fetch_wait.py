"""A fetch parked until enough bytes arrive or its max wait expires.

Woken from the produce path (``PartitionLog.append`` calls ``notify``), so a waiting
consumer is answered in the same event-loop turn as the produce that satisfies it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import NamedTuple

from appliance.broker.storage.partition import PartitionLog


class FetchedPartition(NamedTuple):
    """One partition of a fetch: what a parked fetch keeps of its request."""

    topic: str
    partition: int
    offset: int
    max_bytes: int
    denied: bool  # the caller may not read the topic


class FetchWait:
    def __init__(self, loop: asyncio.AbstractEventLoop, partitions: list[PartitionLog],
                 needed_bytes: int, max_wait_ms: int, complete: Callable[[], object]) -> None:
        self.future: asyncio.Future = loop.create_future()
        self._loop = loop
        self._partitions = partitions
        self._needed = max(needed_bytes, 1)
        self._complete = complete
        self._done = False
        for p in partitions:
            p.waiters.add(self)
        self._timer = loop.call_later(max_wait_ms / 1000.0, self._finish)
        self.future.add_done_callback(self._on_cancel)

    def notify(self, nbytes: int) -> None:
        """Called by a partition after an append (``0`` means the topic went away)."""
        if self._done:
            return
        self._needed -= nbytes
        if self._needed <= 0 or nbytes == 0:
            self._detach()
            # Let the producing handler finish its other partitions first, then answer.
            self._loop.call_soon(self._resolve)

    def _finish(self) -> None:
        if not self._done:
            self._detach()
            self._resolve()

    def _detach(self) -> None:
        self._done = True
        self._timer.cancel()
        for p in self._partitions:
            p.waiters.discard(self)

    def _resolve(self) -> None:
        if not self.future.done():
            try:
                self.future.set_result(self._complete())
            except Exception as exc:  # surfaced to the connection, which logs and closes
                self.future.set_exception(exc)

    def _on_cancel(self, fut: asyncio.Future) -> None:
        if fut.cancelled() and not self._done:
            self._detach()
