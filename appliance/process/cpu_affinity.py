"""The CPUs the appliance's own processes keep to for their first seconds after ``ready``.

Why: a fresh JVM compiles its hot code during the first seconds of real traffic (C2
compilations of 0.7-7.8 s each, docs/bench/appliance-latency.md). Where the broker shares
the host, the compiler, the GC and the task threads take every core, and the broker's event
loop waits for a time slice: the first seconds' tail of every trigger. Keeping the appliance to some
CPUs for those seconds leaves the others to the broker; then the appliance gets back every
CPU it had (the steady state wants them). Before ``ready`` nothing is restricted: a split
from the start made the start-up ~7.5 s longer on two cores.

What it moves: this process (the runner's threads) and every process below it, i.e.
Spark's driver JVM, which with a local master runs the tasks too, but not the embedded
broker's processes: they are the side given room. A cluster's executors run on the
workers (``spark_worker_cpus`` pins them there). A thread started meanwhile inherits the
CPUs of the thread that starts it, so each step walks the threads again until a walk
finds all of them where they belong.

``/proc`` is read directly: ``sched_setaffinity`` takes a thread id, and a JVM's threads
are only listed there.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterable

from appliance import logs
from appliance.cpu_list import cpu_list

log = logs.get_logger("appliance.cpus")

PIN_WALKS = 5  # walks of the threads per step at most (see pin_all)

def tasks(pid: int) -> list[int]:
    """The thread ids of ``pid`` (empty once it has ended)."""
    try:
        return [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return []


def tree(pid: int) -> list[int]:
    """``pid`` and every process below it."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def pin(pids: Iterable[int], cpus: Iterable[int]) -> int:
    """Every thread of ``pids`` on ``cpus``; how many it moved (threads started later
    inherit their creator's). OSError other than a thread that ended meanwhile (a CPU
    outside the cgroup's cpuset, no permission) propagates."""
    wanted, moved = set(cpus), 0
    for pid in pids:
        for tid in tasks(pid):
            try:
                if os.sched_getaffinity(tid) != wanted:
                    os.sched_setaffinity(tid, wanted)
                    moved += 1
            except ProcessLookupError:
                continue
    return moved


def pin_all(pids: Callable[[], Iterable[int]], cpus: Iterable[int]) -> int:
    """``pin`` until a walk moves no thread (at most ``PIN_WALKS``): a thread started during
    a walk by one not yet moved has the old CPUs. How many it moved in all."""
    moved = 0
    for _ in range(PIN_WALKS):
        step = pin(pids(), cpus)
        moved += step
        if step == 0:
            break
    return moved


def allowed_problem(cpus: frozenset[int], allowed: frozenset[int]) -> str | None:
    """Why ``cpus`` cannot be kept to by a process that may use ``allowed``, or None."""
    missing = cpus - allowed
    if missing:
        return (f"CPU {cpu_list(missing)} is not one this process may use "
                f"({cpu_list(allowed)})")
    if cpus == allowed:
        return (f"{cpu_list(cpus)} is every CPU this process may use: name fewer, so the "
                f"others are left to the broker")
    return None


class ReadyCpus:
    """After ``ready``: the appliance's processes on ``cpus`` for ``seconds``, then on the
    CPUs they had at ``start()`` again. ``excluded()`` gives the pids whose trees stay
    as they are (the embedded broker)."""

    def __init__(self, cpus: frozenset[int], seconds: float,
                 excluded: Callable[[], Iterable[int]] = tuple) -> None:
        self.cpus, self.seconds, self._excluded = cpus, seconds, excluded
        self._before: frozenset[int] | None = None
        self._timer: threading.Timer | None = None
        self._lock = threading.Lock()

    def _mine(self) -> list[int]:
        skip = {p for pid in self._excluded() for p in tree(pid)}
        return [p for p in tree(os.getpid()) if p not in skip]

    def start(self) -> None:
        """Keep to ``cpus`` now; a refusal (the cgroup's cpuset changed since the preflight)
        is logged and leaves every CPU as it was: the appliance runs on regardless."""
        before = frozenset(os.sched_getaffinity(0))
        with self._lock:
            try:
                threads = pin_all(self._mine, self.cpus)
            except OSError as exc:
                with contextlib.suppress(OSError):
                    pin_all(self._mine, before)
                log.warning("cpus.not_kept", cpus=cpu_list(self.cpus), error=str(exc))
                return
            self._before = before
        log.info("cpus.kept", cpus=cpu_list(self.cpus), seconds=self.seconds,
                 threads=threads, then=cpu_list(before))
        self._timer = threading.Timer(self.seconds, self.release)
        self._timer.name = "appliance-cpus"
        self._timer.daemon = True
        self._timer.start()

    def release(self) -> None:
        """Every CPU the processes had before (once; the timer or the stop, first wins)."""
        if self._timer is not None:
            self._timer.cancel()
        with self._lock:
            before, self._before = self._before, None
            if before is None:
                return
            try:
                threads = pin_all(self._mine, before)
            except OSError as exc:
                log.warning("cpus.not_released", cpus=cpu_list(before), error=str(exc))
                return
        log.info("cpus.released", cpus=cpu_list(before), threads=threads)
