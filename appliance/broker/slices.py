"""Long work on the one event loop, a slice at a time, so no client waits behind it.

Every client shares the broker's event loop, so a request whose work grows with what a
client wrote (ListOffsets walking a batch's records, a topic's compression.type
recompressing a batch) must not run to the end in one go. Such work is a generator: it
yields ``None`` where it may pause, or a function to run on a worker thread (a
decompression: C code that releases the interpreter lock) and is resumed with that
function's result. ``Slicer.run`` runs the first slice at once and, if the work is not
done after ``SLICE_S`` of it, the rest later, a slice per loop iteration, other clients'
requests in between; the caller gets the result or a future of it.

One job runs at a time, the others wait in order: what their work holds in memory (a
decompressed batch) is then at most one job's worth, whatever the number of clients.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from collections import deque
from collections.abc import Callable, Generator
from typing import Any

SLICE_S = 0.002

Job = Generator[None | Callable[[], Any], Any, Any]


class Slicer:
    def __init__(self, slice_s: float = SLICE_S) -> None:
        self.slice_s = slice_s
        self._waiting: deque[tuple[Job, asyncio.Future]] = deque()
        self._busy = False
        self._threads = concurrent.futures.ThreadPoolExecutor(1, "broker-slices")

    def run(self, job: Job) -> Any:
        """The job's result if it finished within one slice, else a future of it."""
        if not self._busy and not self._waiting:
            self._busy = True
            try:
                done, value = self._step(job, None, None)
            except BaseException:
                self._busy = False
                raise
            if done:
                self._busy = False
                return value
            future = asyncio.get_running_loop().create_future()
            self._continue(job, future, value)
            return future
        future = asyncio.get_running_loop().create_future()
        self._waiting.append((job, future))
        return future

    def _step(self, job: Job, send: Any, throw: BaseException | None) -> tuple[bool, Any]:
        """Run the job for one slice: (True, result) when it returned, else (False, what
        it yielded last: None or a function for a thread)."""
        deadline = time.perf_counter() + self.slice_s
        try:
            out = job.throw(throw) if throw is not None else job.send(send)
            while out is None and time.perf_counter() < deadline:
                out = job.send(None)
        except StopIteration as stop:
            return True, stop.value
        return False, out

    def _continue(self, job: Job, future: asyncio.Future, pending: Any) -> None:
        loop = asyncio.get_running_loop()
        if pending is None:
            loop.call_soon(self._resume, job, future, None, None)
            return
        work = loop.run_in_executor(self._threads, pending)

        def finished(w: asyncio.Future) -> None:
            exc = w.exception()
            self._resume(job, future, None if exc else w.result(), exc)

        work.add_done_callback(finished)

    def _resume(self, job: Job, future: asyncio.Future, send: Any,
                throw: BaseException | None) -> None:
        if future.cancelled():  # the client went away: drop the work
            job.close()
            self._next()
            return
        try:
            done, value = self._step(job, send, throw)
        except Exception as exc:  # surfaced to the connection, which logs and closes
            future.set_exception(exc)
            self._next()
            return
        if done:
            future.set_result(value)
            self._next()
        else:
            self._continue(job, future, value)

    def _next(self) -> None:
        self._busy = False
        while self._waiting:
            job, future = self._waiting.popleft()
            if future.cancelled():
                job.close()
                continue
            self._busy = True
            asyncio.get_running_loop().call_soon(self._resume, job, future, None, None)
            return

    def shutdown(self) -> None:
        self._threads.shutdown(wait=False, cancel_futures=True)
