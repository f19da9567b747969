"""The nemesis against the real thing: ``appliance run`` and a durable embedded broker (in its
own network namespace, on its own small disk) under a steady load of alerting, normal and
bad events, while a seeded schedule of faults (``nemesis.FAULTS``) hits the appliance, the
broker, the broker's disk and the link between them, round after round.

Afterwards every event sent is accounted for (``nemesis_check``): none lost, nothing
unexpected, duplicates only near a fault that can make the appliance replay. The test
asserts those invariants, never a timing. ``make test`` runs the real-time trigger for 3
rounds; ``make faults`` (``FAULTS_LONG=1``) adds the other triggers and 20-round runs.
``FAULTS_SEED=<seed>`` replays a run's schedule (the seed is printed first).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
import uuid

import pytest

from appliance.broker import EmbeddedBroker
from appliance.rules.rules_file import rules_version
from appliance.trigger import interval_ms

from support.faults import netns
from support.faults.fault_process import INTERVALS, write_config
from support.faults.loadrun import rules_yaml
from support.faults.nemesis import (
    FAULTS,
    START_TIMEOUT_S,
    Applied,
    Progress,
    Stage,
    left_out,
    replay_windows,
    run_round,
    schedule,
)
from support.faults.nemesis_check import ReplayWindow, Verdict, check
from support.faults.nemesis_io import Load, Reader, read_topic, sent_events

RATE = 200.0
ALERT_RATIO = 0.2
BAD_RATIO = 0.05
BROKER_DISK = "256m"  # the whole run's records (20 rounds: tens of MB) and room to fill
SETTLE_S = 3.0  # after the last round, and after the last output, for stragglers
DRAIN_TIMEOUT_S = 300.0
CHECK_EVERY_S = 2.0


@pytest.fixture
def namespace():
    why = netns.supported()
    if why is not None:
        pytest.skip(why)
    with netns.namespace() as ns:
        yield ns


@pytest.fixture
def broker_disk(tmp_path):
    """A small tmpfs of the broker's own, which a fault can fill."""
    mount = tmp_path / "broker-disk"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={BROKER_DISK},mode=0755", "tmpfs",
                    str(mount)], check=True, timeout=30)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False, timeout=30)


@pytest.fixture
def nemesis_broker(namespace, broker_disk, tmp_path):
    """A durable broker inside the namespace, on the small disk."""
    broker = EmbeddedBroker(host=namespace.inner_ip, data_dir=broker_disk / "data",
                            log_path=tmp_path / "broker.log", launcher=namespace.launcher)
    broker.start()
    try:
        yield broker
    finally:
        if broker.proc is not None:  # a failed round may have left it stopped
            broker.proc.send_signal(signal.SIGCONT)
        broker.stop()


def topics_on(broker: EmbeddedBroker) -> dict[str, str]:
    tag = uuid.uuid4().hex[:8]
    topics = {"events": f"nemesis-events-{tag}", "alerts": f"nemesis-alerts-{tag}",
              "dead_letters": f"nemesis-dlq-{tag}"}
    broker.create_topics({topics["events"]: 2, topics["alerts"]: 1, topics["dead_letters"]: 1})
    return topics


def drain(load: Load, reader: Reader, stage: Stage, topics: dict[str, str],
          windows: list[ReplayWindow], version: str) -> Verdict:
    """Stop the load, then check until nothing is lost (or the drain times out), then once
    more after ``SETTLE_S`` so late duplicates and strangers are seen too."""
    load.stop()
    events = sent_events(load, read_topic(stage.broker.bootstrap or "", topics["events"]))

    def verdict() -> Verdict:
        return check(events, list(reader.records[topics["alerts"]]),
                     list(reader.records[topics["dead_letters"]]), windows, version)

    deadline = time.monotonic() + DRAIN_TIMEOUT_S
    while verdict().lost and time.monotonic() < deadline:
        stage.hold(CHECK_EVERY_S)
    stage.hold(SETTLE_S)
    if reader.error is not None:
        raise reader.error
    return verdict()


def summary(trigger: str, seed: int, verdict: Verdict, applied: list[Applied], stage: Stage,
            load: Load, seconds: float) -> str:
    faults = ", ".join(a.fault.name for a in applied)
    return (f"nemesis {trigger} seed {seed}: {verdict.line()}; faults applied "
            f"{len(applied)} ({faults}); unplanned appliance exits "
            f"{len(stage.unplanned_exits)}; load re-sent {load.resent}; {seconds:.0f} s")


CASES = [
    pytest.param("realtime", 3, marks=[pytest.mark.exclusive, pytest.mark.timeout(900)]),
    pytest.param("continuous", 3, marks=[pytest.mark.faults_long, pytest.mark.timeout(900)]),
    pytest.param("microbatch", 3, marks=[pytest.mark.faults_long, pytest.mark.timeout(900)]),
    *[pytest.param(trigger, 20, marks=[pytest.mark.faults_long, pytest.mark.timeout(3600)])
      for trigger in ("realtime", "continuous", "microbatch")],
]


@pytest.mark.spark
@pytest.mark.parametrize(("trigger", "rounds"), CASES)
def test_nemesis_accounts_for_every_event(trigger, rounds, namespace, broker_disk,
                                          nemesis_broker, tmp_path, faults_seed):
    rounds = int(os.environ.get("NEMESIS_ROUNDS", rounds))
    started = time.monotonic()
    rng = random.Random(faults_seed)
    plan = schedule(rng, rounds)
    print(f"nemesis {trigger}: {rounds} rounds: {', '.join(f.name for f in plan)}; left out: "
          + "; ".join(left_out()))
    topics = topics_on(nemesis_broker)
    rules = tmp_path / "rules.yml"
    rules.write_text(rules_yaml())
    config = write_config(tmp_path, nemesis_broker.bootstrap, topics, trigger,
                          tmp_path / "checkpoint", rules)
    stage = Stage(nemesis_broker, namespace, broker_disk, config, tmp_path, rng)
    load: Load | None = None
    reader: Reader | None = None
    try:
        stage.start_appliance().wait_for("appliance.ready", timeout=START_TIMEOUT_S)
        load = Load(nemesis_broker.bootstrap, topics["events"], RATE, ALERT_RATIO, BAD_RATIO,
                    run_id=f"nem{faults_seed}")
        reader = Reader(nemesis_broker.bootstrap, [topics["alerts"], topics["dead_letters"]],
                        load.factory).start()
        load.start()
        progress = Progress(load, reader)
        stage.wait_until(lambda: progress.answered_since(0), START_TIMEOUT_S, "first output")
        applied = [run_round(n, fault, stage, progress) for n, fault in enumerate(plan, 1)]
        stage.hold(SETTLE_S)
        interval_s = interval_ms(INTERVALS[trigger]) / 1000.0
        windows = replay_windows(applied, interval_s)
        verdict = drain(load, reader, stage, topics, windows,
                        rules_version(rules.read_bytes()))
        print("\n".join(a.line() for a in applied))
        print("\n".join(stage.notes))
        print(summary(trigger, faults_seed, verdict, applied, stage, load,
                      time.monotonic() - started))
        message = f"FAULTS_SEED={faults_seed}\n{verdict.explain()}"
        assert verdict.lost == [], message
        assert verdict.unexpected == [], message
        assert verdict.duplicates_outside == [], message
        assert stage.appliance.terminate() == 0
    finally:
        if load is not None:
            load.close()
        if reader is not None:
            reader.close()
        for proc in stage.procs:
            proc.cleanup()


def test_the_fault_table_and_schedule_are_what_the_seed_says():
    """Pure Python: the same seed gives the same schedule; each fault comes once before any
    comes twice; every fault has a distinct name."""
    names = [f.name for f in FAULTS]
    assert len(set(names)) == len(names)
    first = [f.name for f in schedule(random.Random(7), 2 * len(FAULTS))]
    assert first == [f.name for f in schedule(random.Random(7), 2 * len(FAULTS))]
    assert sorted(first[:len(FAULTS)]) == sorted(names)
    assert sorted(first[len(FAULTS):]) == sorted(names)


def test_a_replay_window_reaches_back_through_a_fault_still_in_effect():
    """A kill soon after a SIGSTOP replays what was sent before the SIGSTOP began."""
    by_name = {f.name: f for f in FAULTS}
    t = 1_000.0
    applied = [
        Applied(1, by_name["broker-kill-9"], t, t + 5, t + 8),  # opens t - 15
        Applied(2, by_name["appliance-sigstop"], t + 100, t + 115, t + 116),
        Applied(3, by_name["appliance-kill-9"], t + 120, t + 121, t + 130),
    ]
    windows = replay_windows(applied, interval_s=5.0)
    assert [(w.fault, w.opens, w.closes) for w in windows] == [
        ("broker-kill-9", t - 15, t + 8),
        ("appliance-kill-9", t + 100 - 15, t + 130),  # not t + 120 - 15: the SIGSTOP
    ]
