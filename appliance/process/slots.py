"""Task slots granted to this application on a cluster, waited for a bounded time.

Continuous and real-time queries hold one task slot per input partition for as long as
they run; with fewer they never fail, they hang. On a cluster the slots are what the
master granted *this* application (``spark.cores.max``, what other applications left
free, ``spark.task.cpus``), and they exist only once executors have registered, which
takes a few seconds after the SparkContext is up. Spark's default parallelism is no
measure of that (it is at least 2, and whatever ``spark.default.parallelism`` says), so
the count comes from the scheduler: the tasks this application's registered executors can
run at once.
"""

from __future__ import annotations

import time

#: Spark's own "how long to wait for executors to register" setting bounds our wait too.
WAIT_CONF = "spark.scheduler.maxRegisteredResourcesWaitingTime"
WAIT_DEFAULT = "30s"


def granted_slots(sc) -> int:
    """Tasks this application's registered executors can run at once (now)."""
    jsc = sc._jsc.sc()
    profile = jsc.resourceProfileManager().defaultResourceProfile()
    return int(jsc.maxNumConcurrentTasks(profile))


def registration_wait_s(sc) -> float:
    """``spark.scheduler.maxRegisteredResourcesWaitingTime`` in seconds (default 30 s)."""
    return sc._jsc.sc().conf().getTimeAsMs(WAIT_CONF, WAIT_DEFAULT) / 1000.0


def wait_for_slots(sc, wanted: int, timeout_s: float | None = None,
                   poll_s: float = 0.25) -> tuple[int, float]:
    """(slots, seconds waited): returns as soon as ``wanted`` slots are there, else the
    count when the bounded wait ends."""
    timeout_s = registration_wait_s(sc) if timeout_s is None else timeout_s
    started = time.monotonic()
    deadline = started + timeout_s
    while True:
        slots = granted_slots(sc)
        if slots >= wanted or time.monotonic() >= deadline:
            return slots, time.monotonic() - started
        time.sleep(poll_s)
