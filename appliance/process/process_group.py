"""Ending a process together with everything it started, as a service manager would.

Whoever starts ``appliance run`` (the class-archive build, benches, tests) starts it in a
session of its own, so its process group also holds the Spark JVM that pyspark launched.
Stopping it is then two steps, the way systemd's ``KillMode=mixed`` does it: SIGTERM to the
Python process, which stops its query and Spark cleanly, and after a grace period SIGKILL
to the whole group, which ends whatever outlived it. A JVM left behind would hold the
checkpoint, the ports and a core for the next run. Every signal tolerates a process that
is already gone.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path


def signal_group(pgid: int, sig: int) -> bool:
    """Send ``sig`` to process group ``pgid``; False when the group is gone (or not ours)."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def stop(proc: subprocess.Popen, grace: float = 60.0, whole_group: bool = False) -> int | None:
    """SIGTERM ``proc`` (``whole_group``: its group, as ``timeout`` or a terminal does), wait
    up to ``grace`` seconds, then SIGKILL its group in any case. Returns the exit status, or
    None when the process did not even end on SIGKILL within 30 s."""
    if proc.poll() is None:
        if whole_group:
            signal_group(proc.pid, signal.SIGTERM)
        else:
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
    return kill(proc)


def kill(proc: subprocess.Popen) -> int | None:
    """SIGKILL ``proc``'s whole group (``proc`` leads it) and reap ``proc``."""
    signal_group(proc.pid, signal.SIGKILL)
    try:
        return proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        return None


def live_members(pgid: int) -> list[int]:
    """Pids of the group's processes that are not zombies."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:  # gone meanwhile
            continue
        # pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses.
        fields = text[text.rindex(")") + 2:].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(stat.parent.name))
    return members


def wait_gone(pgid: int, timeout: float) -> None:
    """Until no live process of the group is left (raises ``subprocess.TimeoutExpired``).
    Zombies do not count: whether they are reaped is up to the machine's init."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not live_members(pgid):
            return
        time.sleep(0.2)
    raise subprocess.TimeoutExpired(f"process group {pgid}", timeout)
