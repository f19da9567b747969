"""Reading an appliance process's log from outside: its structlog JSON events, in order.

Tests, benchmarks and supervisors start ``appliance run`` (or ``appliance broker``) with
stdout/stderr going to a file and wait for a stable event name (``appliance.ready``,
``query.processing``...; appliance/logs.py). The file also holds what is not ours (the JVM's
own stderr, a traceback), so only whole JSON lines count. The wait is bounded and gives up
early when the process has exited: a crashed process never logs the event.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Protocol

#: How much of the log's end an ``EventNotLogged`` message carries.
TAIL_CHARS = 4000


class EventNotLogged(RuntimeError):
    """The event did not appear in time, or the process exited first; the message ends
    with the log's tail."""


class _Process(Protocol):
    def poll(self) -> int | None: ...


def log_events(path: str | os.PathLike) -> list[dict]:
    """Every JSON event of the log file, in order; other lines are skipped."""
    out = []
    for line in Path(path).read_text(errors="replace").splitlines():
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                pass
    return out


def last_event(path: str | os.PathLike, event: str) -> dict | None:
    """The latest logged ``event`` of the file, None if it has none."""
    found = [e for e in log_events(path) if e.get("event") == event]
    return found[-1] if found else None


def log_tail(path: str | os.PathLike, chars: int = TAIL_CHARS) -> str:
    return Path(path).read_text(errors="replace")[-chars:]


def wait_for_event(path: str | os.PathLike, event: str, proc: _Process, timeout: float,
                   poll: float = 0.2) -> dict:
    """The latest ``event`` of the log, as soon as it is there (checked every ``poll`` s).

    Raises ``EventNotLogged`` after ``timeout`` s, or once ``proc`` (the process writing
    the log) has exited without logging it.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = last_event(path, event)
        if found:
            return found
        if proc.poll() is not None:
            break
        time.sleep(poll)
    raise EventNotLogged(f"no {event} (rc={proc.poll()}):\n{log_tail(path)}")
