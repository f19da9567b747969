"""Why a connection is not being read: several reasons can hold at once (a request in
flight, a request-pool wait, a full write buffer, a request in the pre-auth queue), and
reading resumes only when the last of them is lifted.

Kept apart so that no concern lifts another's pause: the framer pauses for the pool, the
writer for its buffer, the connection for its one request at a time, each under its own
name. A closed connection's gate is shut: nothing resumes it.
"""

from __future__ import annotations

import asyncio


class ReadGate:
    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.shut = False  # the connection is closed (or held off): never read again
        self._reasons: set[str] = set()

    @property
    def reasons(self) -> frozenset[str]:
        """The reasons reading is paused for now (empty: reading)."""
        return frozenset(self._reasons)

    def pause(self, reason: str) -> None:
        self._reasons.add(reason)
        try:
            self.transport.pause_reading()  # type: ignore[union-attr]
        except (AttributeError, RuntimeError):  # closing already, or no transport
            pass

    def resume(self, reason: str) -> None:
        """Lift ``reason``; reading resumes if no other holds and the gate is not shut."""
        self._reasons.discard(reason)
        if not self._reasons and not self.shut and self.transport is not None:
            try:
                self.transport.resume_reading()
            except RuntimeError:
                pass
