"""One progress line per second on stderr (rewritten in place when stderr is a terminal)."""

from __future__ import annotations

import sys
import time


class Progress:
    def __init__(self, label: str, target_rate: float, behind_ms: float, enabled: bool = True,
                 stream=None):
        self.label = label
        self.behind_ms = behind_ms
        self.target_rate = target_rate
        self.enabled = enabled
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._next = time.monotonic() + 1.0
        self._last_sent = 0

    def due(self) -> bool:
        """True once a second (when enabled): time to call ``show``."""
        return self.enabled and time.monotonic() >= self._next

    def show(self, elapsed: float, sent: int, received: int, dlq: int,
             lag_ms: float, p99_ms: float | None) -> None:
        self._next = time.monotonic() + 1.0
        rate = sent - self._last_sent
        self._last_sent = sent
        behind = f" BEHIND schedule by {lag_ms:,.0f}ms" if lag_ms > self.behind_ms else ""
        p99 = "n/a" if p99_ms is None else f"{p99_ms:,.1f}ms"
        line = (f"loadgen [{self.label}] {elapsed:5.1f}s sent={sent:,} ({rate:,}/s of "
                f"{self.target_rate:,.0f}/s) alerts={received:,} dlq={dlq:,} p99={p99}{behind}")
        if self.tty:
            self.stream.write("\r" + line.ljust(100))
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def done(self) -> None:
        if self.enabled and self.tty:
            self.stream.write("\n")
            self.stream.flush()
