"""Waiting for a child process's "I am ready" line on its stdout pipe (``appliance broker``
prints ``broker ready bootstrap=HOST:PORT`` once it listens), bounded in time.

A selector, not ``readline()``: a child that hangs without printing must not hang the
caller past its timeout, and a child that exits (end of the pipe) ends the wait at once.
"""

from __future__ import annotations

import os
import selectors
import time
from typing import IO


def read_until_line(stream: IO[bytes], prefix: str,
                    timeout: float) -> tuple[str | None, list[str]]:
    """``(the first line starting with prefix, the lines read up to and including it)``;
    ``(None, every line read)`` when the pipe ended or ``timeout`` passed first."""
    deadline = time.monotonic() + timeout
    sel = selectors.DefaultSelector()
    sel.register(stream, selectors.EVENT_READ)
    buf = b""
    lines: list[str] = []
    try:
        while time.monotonic() < deadline:
            if not sel.select(timeout=max(0.0, deadline - time.monotonic())):
                continue
            chunk = os.read(stream.fileno(), 4096)
            if not chunk:
                break
            buf += chunk
            # Only whole lines count: a read may end inside the ready line itself.
            *whole, buf = buf.split(b"\n")
            for raw in whole:
                line = raw.decode(errors="replace").rstrip("\r")
                lines.append(line)
                if line.startswith(prefix):
                    return line, lines
    finally:
        sel.close()
    if buf:  # what a child that ended (or hung) wrote without a final newline
        lines.append(buf.decode(errors="replace"))
    return None, lines
