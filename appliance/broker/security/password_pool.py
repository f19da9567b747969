"""The worker processes that check SASL/PLAIN passwords (``sasl.PasswordCheck``).

One PBKDF2 derivation takes milliseconds of CPU (tens on a loaded host); run on the event
loop, a burst of logins would stall every other client for as long. Worker *processes*
rather than threads: a thread would give the interpreter lock back to the loop only at the
interpreter's switch interval after each check, and a busy host then makes the loop wait
for the CPU on top; a process shares nothing with the loop but a pipe. The workers also
run at the lowest CPU priority (nice 19), so on a busy host the event loop, which serves
the clients that already logged in, wins the CPU first.

Bounded twice: a fixed number of workers, and at most one check queued per connection
(the SASL state machine refuses a second SaslAuthenticate while one is checked), with
connections capped per IP. Workers are started with the broker (``start``), not on the
first login, and exit with it, also when it is killed (Linux's parent-death signal).
"""

from __future__ import annotations

import asyncio
import ctypes
import multiprocessing
import os
import signal
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import TypeVar

from appliance.logs import get_logger

log = get_logger("appliance.broker")
T = TypeVar("T")

NICE = 19
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


class PasswordWorkers:
    """The pool, replaced if a worker dies (a pool that lost a worker refuses all work)."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self._pool = self._new_pool()
        self.generation = 0  # bumped by each replacement

    def _new_pool(self) -> ProcessPoolExecutor:
        # spawn: a fresh interpreter, not a fork of the broker with its loop and threads
        return ProcessPoolExecutor(max_workers=self.workers,
                                   mp_context=multiprocessing.get_context("spawn"),
                                   initializer=_worker_init, initargs=(os.getpid(),))

    def start(self) -> None:
        """Start every worker now (each takes a fraction of a second to start)."""
        for _ in range(self.workers):
            self._pool.submit(os.getpid)

    def run(self, fn: Callable[[], T]) -> asyncio.Future[T]:
        """``fn()`` in a worker, as a future of the running loop; if it fails with
        BrokenProcessPool, call ``replace_broken`` with the generation it ran in."""
        loop = asyncio.get_running_loop()
        try:
            return loop.run_in_executor(self._pool, fn)
        except BrokenProcessPool:
            self.replace_broken(self.generation)
            return loop.run_in_executor(self._pool, fn)

    def replace_broken(self, generation: int) -> None:
        if generation != self.generation:
            return  # already replaced, for another check that failed with it
        self.generation += 1
        log.error("broker.password_worker_failed", workers=self.workers,
                  action="starting new password check workers")
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._pool = self._new_pool()
        self.start()

    def shutdown(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
