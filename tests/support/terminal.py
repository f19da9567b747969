"""A command on a pseudo-terminal, as a person runs it in a terminal window.

What the appliance shows people differs from what it gives machines (``appliance.logs``
decides by whether stderr is a terminal), so the terminal view can only be tested on a
real terminal: the child gets a fresh pseudo-terminal as its controlling terminal, in a
session of its own, and Ctrl-C is the byte the terminal turns into SIGINT for the
foreground process group, exactly as a keyboard would. Everything the child writes is
kept (and copied to a transcript file for the failure message).
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import signal
import struct
import subprocess
import termios
import threading
import time
from pathlib import Path

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")
CTRL_C = b"\x03"


def _controlling_terminal() -> None:
    """In the child: a new session whose controlling terminal is the pty on fd 0."""
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


class Terminal:
    """``Terminal(["bash", "-c", script], cwd, env, transcript)``: started at once."""

    def __init__(self, argv: list[str], cwd: Path, env: dict[str, str], transcript: Path,
                 columns: int = 200):
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
        self.transcript = transcript
        self._master = master
        self._data = bytearray()
        self._lock = threading.Lock()
        try:
            self.proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave,
                                         cwd=cwd, env={**env, "TERM": "xterm"},
                                         preexec_fn=_controlling_terminal)
        finally:
            os.close(slave)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        with open(self.transcript, "wb") as copy:
            while True:
                try:
                    chunk = os.read(self._master, 65536)
                except OSError:  # EIO: every holder of the pty's other end closed it
                    return
                if not chunk:
                    return
                with self._lock:
                    self._data += chunk
                copy.write(chunk)
                copy.flush()

    def text(self) -> str:
        """Everything shown so far, escape sequences removed, line ends as ``\\n``."""
        with self._lock:
            raw = bytes(self._data)
        return ANSI.sub("", raw.decode("utf-8", "replace")).replace("\r\n", "\n")

    def wait_for(self, pattern: str, timeout: float) -> re.Match:
        """The first match of ``pattern`` on the terminal; AssertionError after
        ``timeout`` s or once the command ended without showing it."""
        deadline = time.monotonic() + timeout
        while True:
            found = re.search(pattern, self.text())
            if found:
                return found
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self._reader.join(timeout=2)
                found = re.search(pattern, self.text())
                if found:
                    return found
                raise AssertionError(
                    f"no {pattern!r} on the terminal (rc={self.proc.poll()}):\n"
                    f"{self.text()[-4000:]}")
            time.sleep(0.2)

    def ctrl_c(self) -> None:
        os.write(self._master, CTRL_C)

    def wait(self, timeout: float) -> int:
        """The command's exit code (killed, with its session, after ``timeout`` s)."""
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise
        finally:
            self._reader.join(timeout=5)

    def kill(self) -> None:
        """SIGKILL to the command's whole session (its process group)."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=30)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.kill()
        self._reader.join(timeout=5)
        try:
            os.close(self._master)
        except OSError:
            pass
