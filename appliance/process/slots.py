"""Task slots: enough for the trigger, checked before Spark starts where they can be.

A ``local[N]`` master's slots are known from its name, so they are checked before a JVM
starts; on a cluster they are those granted to this application, waited for a bounded
time once the SparkContext is up.

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

import os
import re
import time
from typing import TYPE_CHECKING

from appliance import logs
from appliance.process.preflight import PreflightError
from appliance.trigger import TriggerMode

if TYPE_CHECKING:  # pyspark loads with the Spark side (appliance.process.spark_side)
    from pyspark.sql import SparkSession

#: Spark's own "how long to wait for executors to register" setting bounds our wait too.
WAIT_CONF = "spark.scheduler.maxRegisteredResourcesWaitingTime"
WAIT_DEFAULT = "30s"
#: A query restarted in place after its executors were lost waits at least this long for
#: their replacements: the master launches one when a worker with free cores registers,
#: and a worker restarted by a rolling upgrade (its package, its JVM) came back after
#: Spark's 30 s in the deploy test; exiting instead loses the session's warm JVM too.
RESTART_WAIT_S = 180.0
#: How often a long wait for slots says it still waits.
WAIT_PROGRESS_S = 10.0

log = logs.get_logger("appliance")


def local_slots(master: str) -> int | None:
    """Task slots of a ``local[...]`` master; None for a cluster master."""
    if master == "local":
        return 1
    match = re.match(r"^local\[(\d+|\*)(?:,\d+)?\]$", master)
    if not match:
        return None
    return os.cpu_count() or 1 if match.group(1) == "*" else int(match.group(1))


def spark_master(spark: SparkSession) -> str:
    """The running SparkContext's master: pyspark types it Optional, but a SparkContext
    does not start without one."""
    master = spark.sparkContext.master
    if master is None:
        raise RuntimeError("the SparkContext has no master (spark.master)")
    return master


def check_slots(mode: TriggerMode, partitions: int, slots: int, where: str,
                fix: str | None = None) -> None:
    """A query of long-running tasks hangs (never fails) without a slot per partition."""
    if mode.slot_per_partition and slots < partitions:
        fix = fix or f'e.g. spark.master = "local[{partitions}]"'
        raise PreflightError(
            f"query.trigger={mode.name} needs one task slot per input partition: the events "
            f"topic has {partitions} partitions but {where} gives {slots} slots; "
            f"use at least {partitions} ({fix})")


def check_cluster_slots(spark: SparkSession, mode: TriggerMode, partitions: int,
                        wait_s: float | None = None) -> None:
    """On a cluster: wait (bounded: ``wait_s``, Spark's registration wait when None) for
    this application's executors, then check slots."""
    if not mode.slot_per_partition:
        return
    sc = spark.sparkContext
    slots, waited = wait_for_slots(sc, partitions, wait_s)
    log.info("spark.executors", slots=slots, needed=partitions, waited_s=round(waited, 1))
    check_slots(mode, partitions, slots,
                f"{sc.master} (cores granted to this application)",
                fix="more workers or cores, a higher spark.cores.max, or fewer partitions")


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
    count when the bounded wait ends; says every ``WAIT_PROGRESS_S`` that it still waits."""
    timeout_s = registration_wait_s(sc) if timeout_s is None else timeout_s
    started = time.monotonic()
    deadline, said = started + timeout_s, started
    while True:
        slots, now = granted_slots(sc), time.monotonic()
        if slots >= wanted or now >= deadline:
            return slots, now - started
        if now - said >= WAIT_PROGRESS_S:
            said = now
            log.info("spark.executors_waiting", slots=slots, needed=wanted,
                     waited_s=round(now - started, 1), bound_s=round(timeout_s, 1))
        time.sleep(poll_s)
