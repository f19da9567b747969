"""The nemesis: a table of faults and a seeded schedule that applies them one round after
another to a real appliance and a real broker under load.

Each fault is a row (``Fault``): what it hits, whether it can make the appliance replay
(and so may cause duplicates, which the checker allows only near it), how to inject it and
how to heal it. A round lets the load run a few seconds, injects one fault, holds it, heals
it and waits until the appliance answers events sent after the heal. The seed picks the
faults (each fault once before any repeats) and the timings, so a failing run is replayed
by its seed. Every loop is bounded in count and in time.

The stage (``Stage``): the broker runs in its own network namespace (``netns.py``), durable
on a small tmpfs of its own, so the link to it can be cut or throttled and its disk filled;
the appliance is ``appliance run`` in a process group of its own, restarted as a supervisor
would (systemd's ``Restart=on-failure``) when it exits 1 on its own.
"""

from __future__ import annotations

import errno
import os
import random
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from appliance.broker import EmbeddedBroker
from appliance.process.process_group import signal_group

from support.appliance_process import ApplianceProcess
from support.faults.fault_knobs import knob
from support.faults.nemesis_check import ReplayWindow
from support.faults.nemesis_io import Load, Reader
from support.faults.netns import Netns, netem_available

ROUND_LOAD_S = (2.0, 4.0)  # load before each fault
# ``make faults`` holds each fault 3x longer: past the load's message.timeout.ms (10 s),
# so that re-sends (an event written twice) are exercised too.
HOLD_SCALE = knob(1.0, 3.0)
START_TIMEOUT_S = 300.0  # a JVM start on a busy 2-core box
RECOVERY_TIMEOUT_S = 300.0
SUPERVISE_POLL_S = 0.25
BALLAST_CHUNK = b"\0" * 65536


class ApplianceExit(AssertionError):
    """The appliance exited with a code a supervisor would not restart (not 1)."""


@dataclass
class Stage:
    """What the faults act on: the broker (its namespace and disk) and the appliance."""

    broker: EmbeddedBroker
    netns: Netns
    disk: Path  # the tmpfs that holds the broker's data directory
    config: Path  # the appliance's config file
    logs: Path  # directory for the appliance's logs
    rng: random.Random
    procs: list[ApplianceProcess] = field(default_factory=list)
    unplanned_exits: list[tuple[float, int]] = field(default_factory=list)  # (epoch s, rc)
    appliance_down: bool = False  # a fault stopped it on purpose: do not supervise
    notes: list[str] = field(default_factory=list)

    @property
    def appliance(self) -> ApplianceProcess:
        return self.procs[-1]

    def start_appliance(self) -> ApplianceProcess:
        self.procs.append(ApplianceProcess(self.config,
                                           self.logs / f"appliance-{len(self.procs)}.log"))
        self.appliance_down = False
        return self.appliance

    def supervise(self) -> None:
        """Restart an appliance that exited 1 by itself; any other exit fails the run."""
        if self.appliance_down or not self.procs:
            return
        code = self.appliance.proc.poll()
        if code is None:
            return
        if code != 1:
            raise ApplianceExit(f"appliance exited {code}:\n{self.appliance.text()[-3000:]}")
        self.unplanned_exits.append((time.time(), code))
        self.start_appliance()

    def hold(self, seconds: float) -> None:
        """Sleep ``seconds`` while supervising."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.supervise()
            time.sleep(min(SUPERVISE_POLL_S, max(0.0, deadline - time.monotonic())))

    def wait_until(self, done: Callable[[], bool], timeout: float, what: str) -> float:
        """Supervise until ``done()``; seconds it took. Raises after ``timeout``."""
        started = time.monotonic()
        while not done():
            if time.monotonic() - started > timeout:
                raise AssertionError(f"{what}: not within {timeout:g} s")
            self.supervise()
            time.sleep(SUPERVISE_POLL_S)
        return time.monotonic() - started


# -- the faults ----------------------------------------------------------------------


def kill_appliance(stage: Stage) -> None:
    stage.appliance_down = True
    stage.appliance.kill()


def restart_appliance(stage: Stage) -> None:
    stage.start_appliance()


def kill_appliance_twice(stage: Stage) -> None:
    """kill -9, restart, and kill -9 again while it recovers (before ``query.processing``)."""
    kill_appliance(stage)
    proc = stage.start_appliance()
    stage.appliance_down = True
    proc.wait_for("spark.ready", timeout=START_TIMEOUT_S)
    time.sleep(stage.rng.uniform(0.0, 1.0))
    during = proc.find("query.processing") is None
    proc.kill()
    stage.notes.append("second kill " + ("during recovery" if during else
                                         "after query.processing (the start was fast)"))


def signal_appliance(sig: int) -> Callable[[Stage], None]:
    def send(stage: Stage) -> None:
        stage.appliance_down = sig == signal.SIGSTOP  # a stopped process is not supervised
        signal_group(stage.appliance.proc.pid, sig)
    return send


def kill_broker(stage: Stage) -> None:
    stage.broker.kill()


def restart_broker(stage: Stage) -> None:
    stage.broker.start()  # same port, same data directory


def signal_broker(sig: int) -> Callable[[Stage], None]:
    def send(stage: Stage) -> None:
        assert stage.broker.proc is not None
        os.kill(stage.broker.proc.pid, sig)
    return send


def ballast(stage: Stage) -> Path:
    return stage.disk / "ballast"


def fill_broker_disk(stage: Stage) -> None:
    """Write a ballast file until the broker's disk says ENOSPC."""
    with ballast(stage).open("wb", buffering=0) as out:
        for _ in range(1 << 16):  # bounded: 4 GiB, far more than the tmpfs holds
            try:
                out.write(BALLAST_CHUNK)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                return
    raise AssertionError("the broker's disk never filled")


def free_broker_disk(stage: Stage) -> None:
    ballast(stage).unlink()


def partition(stage: Stage) -> None:
    stage.netns.partition()


def heal_partition(stage: Stage) -> None:
    stage.netns.heal_partition()


def throttle(stage: Stage) -> None:
    stage.netns.throttle()


def unthrottle(stage: Stage) -> None:
    stage.netns.unthrottle()


@dataclass(frozen=True)
class Fault:
    """One row of the table. ``replay``: the fault can make the appliance process events
    again (a restart from its checkpoint, a client's retried write), so duplicates of
    events sent near it are allowed."""

    name: str
    target: str  # "appliance" | "broker" | "broker disk" | "network"
    replay: bool
    inject: Callable[[Stage], None]
    heal: Callable[[Stage], None]
    hold_s: tuple[float, float] = (2.0, 5.0)


FAULTS: tuple[Fault, ...] = (
    Fault("appliance-kill-9", "appliance", True, kill_appliance, restart_appliance,
          (0.5, 2.0)),
    Fault("appliance-kill-9-in-recovery", "appliance", True, kill_appliance_twice,
          restart_appliance, (0.5, 2.0)),
    # Seconds of SIGSTOP are far below every client and Spark timeout: nothing replays.
    Fault("appliance-sigstop", "appliance", False, signal_appliance(signal.SIGSTOP),
          signal_appliance(signal.SIGCONT)),
    Fault("broker-kill-9", "broker", True, kill_broker, restart_broker),
    Fault("broker-sigstop", "broker", True, signal_broker(signal.SIGSTOP),
          signal_broker(signal.SIGCONT)),
    Fault("broker-disk-full", "broker disk", True, fill_broker_disk, free_broker_disk),
    Fault("network-partition", "network", True, partition, heal_partition),
    Fault("network-throttle", "network", True, throttle, unthrottle, (3.0, 6.0)),
)


def left_out() -> list[str]:
    """The faults the table leaves out, and why (the test prints them)."""
    netem = ("this kernel has no sch_netem" if not netem_available() else
             "sch_netem is here, but the table was built on kernels without it")
    return [f"network delay/loss (netem): {netem}"]


def schedule(rng: random.Random, rounds: int, faults: tuple[Fault, ...] = FAULTS) -> list[Fault]:
    """``rounds`` faults: successive shuffles of the table, so each fault comes once before
    any comes twice."""
    out: list[Fault] = []
    while len(out) < rounds:
        out += rng.sample(faults, len(faults))
    return out[:rounds]


# -- a round -------------------------------------------------------------------------


@dataclass(frozen=True)
class Applied:
    """One round as it happened (epoch s)."""

    round: int
    fault: Fault
    injected: float
    healed: float
    recovered: float

    def line(self) -> str:
        return (f"round {self.round} {self.fault.name}: held "
                f"{self.healed - self.injected:.1f} s, recovered after "
                f"{self.recovered - self.healed:.1f} s")


@dataclass(frozen=True)
class Progress:
    """Whether the appliance answers new events: an output for an event sent after a mark."""

    load: Load
    reader: Reader

    def mark(self) -> int:
        return self.load.next_index

    def answered_since(self, mark: int) -> bool:
        for thread in (self.load, self.reader):  # a dead thread would look like no recovery
            if thread.error is not None:
                raise thread.error
        return self.reader.latest >= mark


def replay_windows(applied: list[Applied], interval_s: float) -> list[ReplayWindow]:
    """The replay window of each replay-capable round (``ReplayWindow.around``), reaching
    further back when an earlier round was still in effect when it opened: the appliance
    commits nothing while it is stopped, cut off or recovering, so what a replay repeats
    then goes back to before that earlier fault (seen: a kill 6 s after a 15 s SIGSTOP
    in real-time mode replayed events sent 15.1 s before the kill)."""
    windows = []
    for n, this in enumerate(applied):
        if not this.fault.replay:
            continue
        window = ReplayWindow.around(this.fault.name, this.injected, this.recovered,
                                     interval_s)
        opens = window.opens
        for earlier in reversed(applied[:n]):
            if earlier.recovered >= opens:
                opens = min(opens, ReplayWindow.around(earlier.fault.name, earlier.injected,
                                                       earlier.recovered, interval_s).opens)
        windows.append(replace(window, opens=opens))
    return windows


def run_round(n: int, fault: Fault, stage: Stage, progress: Progress) -> Applied:
    """Load, inject, hold, heal, then wait until the appliance answers an event sent after
    the heal (a replay of older ones does not count)."""
    stage.hold(stage.rng.uniform(*ROUND_LOAD_S))
    injected = time.time()
    try:
        fault.inject(stage)
        stage.hold(stage.rng.uniform(*fault.hold_s) * HOLD_SCALE)
    finally:
        fault.heal(stage)
    healed = time.time()
    mark = progress.mark()
    stage.wait_until(lambda: progress.answered_since(mark), RECOVERY_TIMEOUT_S,
                     f"recovery from {fault.name}")
    return Applied(n, fault, injected, healed, time.time())
