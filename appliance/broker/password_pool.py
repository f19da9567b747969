"""The worker processes that check SASL/PLAIN passwords (``sasl.PasswordCheck``).

One PBKDF2 derivation takes milliseconds of CPU (tens on a loaded host); run on the event
loop, a burst of logins would stall every other client for as long. Worker *processes*
rather than threads: a thread would give the interpreter lock back to the loop only at the
interpreter's switch interval after each check, and a busy host then makes the loop wait
for the CPU on top; a process shares nothing with the loop but a pipe. The workers also
run at a lower CPU priority (nice +10), so on a busy host the event loop, which serves
the clients that already logged in, wins the CPU first.

Bounded twice: a fixed number of workers, and at most one check queued per connection
(the SASL state machine refuses a second SaslAuthenticate while one is checked), with
connections capped per IP. Workers are started with the broker (``start``), not on the
first login, and exit with it, also when it is killed (Linux's parent-death signal).
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
from concurrent.futures import Executor, ProcessPoolExecutor

NICE = 10
_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _worker_init(broker_pid: int) -> None:
    """In each worker: die with the broker (even after its kill -9: the worker's own copy
    of the task pipe would otherwise keep it waiting forever), and yield the CPU to it."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (AttributeError, OSError):
        pass  # not Linux: the worker outlives a killed broker until its host restarts
    if os.getppid() != broker_pid:  # the broker died before the line above
        os._exit(1)
    try:
        os.nice(NICE)
    except OSError:
        pass  # not allowed here: the checks just share the CPU equally


def new_pool(workers: int) -> Executor:
    # spawn: a fresh interpreter, not a fork of the broker with its loop and threads
    return ProcessPoolExecutor(max_workers=workers,
                               mp_context=multiprocessing.get_context("spawn"),
                               initializer=_worker_init, initargs=(os.getpid(),))


def start(pool: Executor, workers: int) -> None:
    """Start every worker now (each takes a fraction of a second to start)."""
    for _ in range(workers):
        pool.submit(os.getpid)
