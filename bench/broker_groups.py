"""Benchmark: the embedded broker's consumer groups with the Java client.

Rebalance time of a 3-member group over 6 partitions, each member a JVM of its own:
``form`` (three members start together; from the last one's ``subscribe()``, so the
broker's initial rebalance delay counts but the JVMs' start does not),
``leave`` (one closes: LeaveGroup), ``join`` (it comes back), ``crash`` (it is killed -9:
the coordinator notices when its session times out). Each is the time from the event (the
member's ``subscribe()``, the signal) until the members' rebalance callbacks show every
partition owned once. Then produce->consume latency at 10,000 records/s through a group
consumer (``subscribe()``, auto-commit) next to an ``assign()`` consumer of the same
partition, in the same JVM and run: the group's cost on the hop, if any. Medians over
``--repeats``; each run waits (bounded) for the CPUs to quiet down first and records how
busy they were. Writes ``reports/bench/broker_groups.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

from bench import _machine as machine
from bench._broker_load import owned_partitions
from bench._java import compile_driver

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "reports" / "bench" / "broker_groups.json"
PARTITIONS = 6
MAIN = "BrokerGroupsBench"


class Member:
    """One member JVM; its OWNED lines, read as they come (wall-clock stamped)."""

    def __init__(self, cp: str, bootstrap: str, topic: str, group: str, session_ms: int,
                 heartbeat_ms: int) -> None:
        self.proc = subprocess.Popen(
            ["java", "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-Xmx256m", "-cp", cp, MAIN,
             "member", bootstrap, topic, group, str(session_ms), str(heartbeat_ms)],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.started_ms: float | None = None  # wall clock just before subscribe()
        self.owned: frozenset[int] | None = None
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            parts = line.split()
            if parts[:1] == ["START"]:
                self.started_ms = float(parts[1])
            elif parts[:1] == ["OWNED"]:
                self.owned = owned_partitions(parts, 1)

    def signal(self, sig: int) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        self.proc.wait(timeout=30)


def _shared(members: list[Member]) -> bool:
    sets = [m.owned for m in members]
    if any(not s for s in sets):
        return False
    every = [p for s in sets for p in s]  # type: ignore[union-attr]
    return len(every) == len(set(every)) == PARTITIONS


def _wait_shared(members: list[Member], since: float, timeout: float = 120.0) -> float:
    """Seconds from ``since`` (wall clock) until the members share every partition."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _shared(members):
            return round(time.time() - since, 3)
        time.sleep(0.01)
    raise RuntimeError(f"members never shared the partitions: {[m.owned for m in members]}")


def _rebalance_round(cp: str, broker, session_ms: int, heartbeat_ms: int) -> dict:
    topic = f"rebalance-{uuid.uuid4().hex[:6]}"
    broker.create_topics({topic: PARTITIONS})
    start = lambda: Member(cp, broker.bootstrap, topic, topic, session_ms, heartbeat_ms)  # noqa: E731
    members = [start() for _ in range(3)]
    try:
        deadline = time.monotonic() + 60
        while any(m.started_ms is None for m in members) and time.monotonic() < deadline:
            time.sleep(0.01)
        last_subscribed = max(m.started_ms or 0 for m in members) / 1000
        out = {"form_s": _wait_shared(members, last_subscribed)}
        leaving = members.pop()
        t0 = time.time()
        leaving.signal(signal.SIGTERM)  # close(): LeaveGroup
        out["leave_s"] = _wait_shared(members, t0)
        joining = start()
        members.append(joining)
        deadline = time.monotonic() + 60
        while joining.started_ms is None and time.monotonic() < deadline:
            time.sleep(0.01)
        out["join_s"] = _wait_shared(members, (joining.started_ms or 0) / 1000)
        crashing = members.pop()
        t0 = time.time()
        crashing.signal(signal.SIGKILL)
        out["crash_s"] = _wait_shared(members, t0)
        return out
    finally:
        for m in members:
            m.signal(signal.SIGKILL)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bench.broker_groups", description=__doc__)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--session-ms", type=int, default=6000,
                    help="members' session.timeout.ms (Kafka's smallest allowed: 6000)")
    ap.add_argument("--heartbeat-ms", type=int, default=2000,
                    help="members' heartbeat.interval.ms (a third of the session)")
    ap.add_argument("--rate", type=int, default=10_000)
    ap.add_argument("--seconds", type=float, default=10.0, help="measured seconds per run")
    ap.add_argument("--warmup", type=float, default=2.0)
    ap.add_argument("--fetch-max-wait-ms", type=int, default=100)
    ap.add_argument("--quiet-wait", type=float, default=30.0,
                    help="before each run, wait up to this many seconds for the CPUs to be "
                         "< 30%% busy (other suites share them); 0 = don't wait")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    if args.repeats < 1 or args.rate < 1 or args.session_ms < 6000:
        print("bench.broker_groups: --repeats and --rate must be >= 1, --session-ms >= 6000",
              file=sys.stderr)
        return 2

    from appliance.broker import EmbeddedBroker

    cp = compile_driver(f"{MAIN}.java")
    result: dict = {"client": "java kafka-clients 3.9.1, range assignor",
                    "session_timeout_ms": args.session_ms,
                    "heartbeat_interval_ms": args.heartbeat_ms,
                    "broker_initial_rebalance_delay_ms": 3000, "repeats": args.repeats,
                    "cpu_count": os.cpu_count(), "load_avg_at_start": os.getloadavg()[0]}
    started = time.monotonic()
    with EmbeddedBroker() as broker:
        rounds = []
        for _ in range(args.repeats):
            busy = machine.wait_for_quiet(args.quiet_wait) if args.quiet_wait > 0 else None
            cpu0 = machine.cpu_times()
            r = _rebalance_round(cp, broker, args.session_ms, args.heartbeat_ms)
            r.update(cpu_busy_before=busy, cpu_busy_during=machine.busy_since(cpu0))
            rounds.append(r)
            print(f"rebalance: {r}", file=sys.stderr)
        result["rebalance"] = {
            "median_s": {k: statistics.median(r[k] for r in rounds)
                         for k in ("form_s", "leave_s", "join_s", "crash_s")},
            "runs": rounds}
        runs = []
        for _ in range(args.repeats):
            topic = f"glat-{uuid.uuid4().hex[:6]}"
            broker.create_topics({topic: 1})
            busy = machine.wait_for_quiet(args.quiet_wait) if args.quiet_wait > 0 else None
            cpu0 = machine.cpu_times()
            proc = subprocess.run(
                ["java", "-Xms256m", "-cp", cp, MAIN, "latency", broker.bootstrap, topic, topic,
                 str(args.rate), str(args.seconds), str(args.warmup),
                 str(args.fetch_max_wait_ms)],
                capture_output=True, text=True, timeout=args.seconds + args.warmup + 180)
            if proc.returncode != 0:
                raise RuntimeError(f"latency run failed: {proc.stderr[-2000:]}")
            run = json.loads(proc.stdout.strip().splitlines()[-1])
            run.update(cpu_busy_before=busy, cpu_busy_during=machine.busy_since(cpu0))
            runs.append(run)
            print(f"latency: assign p99 {run['assign']['p99_ms']} ms, group p99 "
                  f"{run['group']['p99_ms']} ms", file=sys.stderr)
        result["latency"] = {
            "rate": args.rate, "fetch_max_wait_ms": args.fetch_max_wait_ms,
            "seconds_per_run": args.seconds,
            "median_ms": {consumer: {q: statistics.median(r[consumer][f"{q}_ms"] for r in runs)
                                     for q in ("p50", "p99", "p999", "max")}
                          for consumer in ("assign", "group")},
            "runs": runs}
    machine.write_result(args.out, result, started)
    print(f"rebalance medians {result['rebalance']['median_s']}; latency medians "
          f"{result['latency']['median_ms']}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
