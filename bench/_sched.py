"""Scheduling levers the latency bench applies to a cell's processes from outside.

Two cores run the broker, the load driver and the appliance's JVM, whose task threads
share them with its own JIT compiler and concurrent GC threads. The levers here change who
waits for whom, without changing the product:

- ``ThreadPolicy``: the appliance JVM's threads whose names start with given prefixes (the
  ``C2 CompilerThread0`` family, ``G1 Conc#0``...) get a nice value or ``SCHED_IDLE``.
  Applied again every ``PERIOD_S`` (the JVM starts and stops compiler threads as its queue
  grows and shrinks), by the bench, to the driver JVM only (a local master runs the tasks
  there). A thread's nice value is its own on Linux, so this needs no privilege to lower a
  priority. The shipped form of the compiler lever is JVM flags (``appliance.tuning``),
  which reach executors on a cluster too; this form also reaches the GC's threads, for
  which HotSpot has no flag of their own.
- ``Affinity``: the appliance's processes on some CPUs and the broker and load driver on
  the others (an ablation: on two cores it halves what each side has), from the
  appliance's start or only from its ``ready`` line (so the start-up and warm-up keep
  every core), for the whole run or its first ``for_s`` seconds (the JIT's busiest).
- ``Priority``: nice values for whole processes, the appliance's (its JVM inherits it) and
  the broker's, which is what a systemd unit's ``Nice=`` gives a service on a real host.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass

from appliance.process.cpu_affinity import pin, tasks, tree

PERIOD_S = 0.5


@dataclass(frozen=True)
class ThreadPolicy:
    """``nice`` (0-19) or ``idle`` (SCHED_IDLE) for threads named ``prefixes*``."""

    prefixes: tuple[str, ...]
    nice: int | None = None
    idle: bool = False

    def __post_init__(self) -> None:
        if (self.nice is None) == (not self.idle):
            raise ValueError("ThreadPolicy: exactly one of nice and idle")

    def matches(self, thread_name: str) -> bool:
        return thread_name.startswith(self.prefixes)

    def apply(self, tid: int) -> None:
        if self.idle:
            os.sched_setscheduler(tid, os.SCHED_IDLE, os.sched_param(0))
        else:
            os.setpriority(os.PRIO_PROCESS, tid, self.nice)


JIT_THREADS = ("C1 CompilerThre", "C2 CompilerThre")  # /proc keeps 15 bytes of a name
GC_CONCURRENT_THREADS = ("G1 Conc#", "G1 Main Marker", "G1 Refine#", "G1 Service")


@dataclass(frozen=True)
class Affinity:
    """The appliance on the first ``appliance_cpus`` CPUs, the broker and driver on the rest:
    from the appliance's start, or from its ``ready`` line when ``from_ready``; for the
    whole run, or until ``for_s`` seconds after that when set (then every CPU again)."""

    appliance_cpus: int = 1
    from_ready: bool = False
    for_s: float | None = None

    def split(self) -> tuple[set[int], set[int]]:
        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) <= self.appliance_cpus:
            raise RuntimeError(f"Affinity: {len(cpus)} CPUs, cannot give "
                               f"{self.appliance_cpus} to the appliance and keep one")
        return set(cpus[:self.appliance_cpus]), set(cpus[self.appliance_cpus:])


@dataclass(frozen=True)
class Priority:
    """The appliance's process tree at nice ``appliance_nice`` (set in the child before it
    runs, so the JVM it starts inherits it) and every thread of the running broker at
    ``broker_nice``; the load driver stays at 0. A negative value needs root."""

    appliance_nice: int = 0
    broker_nice: int = 0

    def preexec(self) -> None:
        """For ``subprocess.Popen(preexec_fn=...)``: the appliance process's own nice."""
        os.setpriority(os.PRIO_PROCESS, 0, self.appliance_nice)


def thread_name(pid: int, tid: int) -> str:
    try:
        with open(f"/proc/{pid}/task/{tid}/comm") as f:
            return f.read().rstrip("\n")
    except OSError:
        return ""


def renice(pids: Iterable[int], nice: int) -> None:
    """Every thread of ``pids`` at ``nice`` (a Linux thread's nice value is its own; new
    threads inherit their creator's). PermissionError (a negative value without root)
    propagates: a cell whose lever was not applied would pass for the defaults."""
    for pid in pids:
        for tid in tasks(pid):
            try:
                os.setpriority(os.PRIO_PROCESS, tid, nice)
            except ProcessLookupError:
                pass  # the thread ended meanwhile


class Pinning:
    """``affinity`` applied to the appliance's process tree and the others' (the broker, the
    load driver): ``apply()`` splits the CPUs (and, with ``for_s``, gives every CPU back
    that long after), ``release()`` gives every CPU back to all of them."""

    def __init__(self, affinity: Affinity, appliance: int, others: list[int]) -> None:
        self.affinity, self.appliance, self.others = affinity, appliance, others
        self.applied_s: float | None = None
        self.released_s: float | None = None
        self._timer: threading.Timer | None = None
        self._lock = threading.Lock()
        self._start = time.monotonic()

    def _others(self) -> list[int]:
        return [p for pid in self.others for p in tree(pid)]

    def apply(self) -> None:
        mine, theirs = self.affinity.split()
        with self._lock:
            pin(tree(self.appliance), mine)  # a JVM started later inherits it
            pin(self._others(), theirs)
            self.applied_s = round(time.monotonic() - self._start, 2)
        if self.affinity.for_s is not None:
            self._timer = threading.Timer(self.affinity.for_s, self.release)
            self._timer.daemon = True
            self._timer.start()

    def release(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        every = os.sched_getaffinity(0)
        with self._lock:
            if self.released_s is not None:
                return
            pin([*tree(self.appliance), *self._others()], every)
            self.released_s = round(time.monotonic() - self._start, 2)


class ThreadPolicyKeeper:
    """Applies ``policy`` to the matching threads of ``root``'s process tree every
    ``PERIOD_S`` until ``stop()``; ``applied`` counts the threads it changed."""

    def __init__(self, root: int, policy: ThreadPolicy) -> None:
        self.root, self.policy = root, policy
        self.applied = 0
        self._done: set[tuple[int, int]] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-thread-policy",
                                        daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            for pid in tree(self.root):
                for tid in tasks(pid):
                    if (pid, tid) in self._done or not self.policy.matches(
                            thread_name(pid, tid)):
                        continue
                    try:
                        self.policy.apply(tid)
                    except OSError:
                        continue  # ended meanwhile
                    self._done.add((pid, tid))
                    self.applied += 1
            self._stop.wait(PERIOD_S)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join(timeout=10)
        return self.applied
