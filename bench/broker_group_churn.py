"""Benchmark: consumer-group members joining and leaving the embedded broker's groups under
load, KIP-848 (``group.protocol=consumer``) against the classic protocol.

The point of KIP-848 is that a rebalance stops no one: only the partitions that move
pause. This measures it with real clients. Each run starts a fresh broker as the product
starts it (``appliance.broker.EmbeddedBroker``: a subprocess, on a data directory), a
topic of ``--partitions`` partitions, a paced producer at a fixed rate
(``bench._paced_producer``) and librdkafka members as separate processes
(``bench._churn_member``: auto-commit, as group consumers usually run). The churn script:

- ``form``: one member alone (before the load starts);
- ``steady``: the load runs, nothing changes (the baseline window);
- ``join k/N``: members join one at a time up to ``--members``;
- ``leave k->k-1``: the newest members close (a clean leave) down to two;
- ``kill 2->1``: one of the two is killed -9; the group notices when its session
  expires (``--session-ms``, the broker's for KIP-848, the client's for classic).

Each event waits (bounded) until the group is balanced again, then holds ``--hold``
seconds. Per event, over its window (until the next event): seconds until balanced (from
the members' assignment callbacks: every partition owned by one live member, each with
its fair share), the longest gap between two consumptions of any one partition, the
produce->consume latency (p50/p99/max of the records first consumed in it), and the
duplicates consumed in it. Per run: records lost (offsets below the end that no member
consumed: must be 0), the committed offsets at the end (must equal the ends), callbacks
that left a partition owned twice, and the latency per second. Medians over
``--repeats``; each run waits (bounded) for the CPUs to quiet down and records how busy
they were. Writes ``reports/bench/broker_group_churn.json`` (``--quick``: a short smoke
form, written beside it as ``broker_group_churn.quick.json``).
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient

from appliance.broker import EmbeddedBroker
from appliance.broker.wire.client import WireClient
from bench import _machine as machine
from bench._broker_load import offsets, owned_partitions
from bench._churn_analysis import (
    Change,
    Consumed,
    Event,
    balanced,
    event_figures,
    load,
    overlaps,
    per_second,
)
from bench._churn_member import PROTOCOLS

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "reports" / "bench" / "broker_group_churn.json"
JOIN_BOUND_S = 60.0  # a join or a leave that has not balanced by then is reported as never
START_BOUND_S = 30.0
DRAIN_BOUND_S = 60.0


class Member:
    """One member process; its START and OWNED lines appended to the run's history."""

    def __init__(self, name: str, argv: list[str], workdir: Path, history: list[Change],
                 lock: threading.Lock) -> None:
        self.name = name
        self.records = workdir / f"{name}.records"
        self.history, self.lock = history, lock
        self.started_ns: int | None = None
        self.owned: frozenset[int] | None = None
        self.live = True
        with open(workdir / f"{name}.err", "wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "bench._churn_member", *argv, str(self.records)],
                stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL, text=True,
                cwd=ROOT)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            parts = line.split()
            if parts[:1] == ["START"]:
                with self.lock:
                    self.started_ns = int(parts[1])
                    self.history.append(Change(self.started_ns, self.name, None))
            elif parts[:1] == ["OWNED"]:
                owned = owned_partitions(parts, 2)
                with self.lock:
                    if self.live:
                        self.owned = owned
                        self.history.append(Change(int(parts[1]), self.name, owned))

    def wait_started(self) -> int:
        deadline = time.monotonic() + START_BOUND_S
        while self.started_ns is None:
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError(f"member {self.name} did not start (rc "
                                   f"{self.proc.poll()}); see {self.records.parent}")
            time.sleep(0.01)
        return self.started_ns

    def end(self, sig: int) -> int:
        """SIGTERM (it closes: a clean leave) or SIGKILL (a crash); returns when, in ns.
        From then on it is not a live member, whatever its last callbacks say."""
        with self.lock:
            self.live = False
            ns = time.time_ns()
            self.history.append(Change(ns, self.name, None, gone=True))
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return ns

    def reap(self, timeout: float = 30.0) -> int | None:
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(timeout=timeout)


class Run:
    """One churn script for one protocol at one rate, against a broker of its own."""

    def __init__(self, protocol: str, rate: int, args: argparse.Namespace,
                 workdir: Path) -> None:
        self.protocol, self.rate, self.args, self.workdir = protocol, rate, args, workdir
        self.topic = self.group = f"churn-{protocol}-{rate}-{uuid.uuid4().hex[:6]}"
        self.history: list[Change] = []
        self.lock = threading.Lock()
        self.members: list[Member] = []
        self.events: list[Event] = []
        self.never: list[str] = []
        self.producer: Producer | None = None
        self.form_ns = 0

    def live(self) -> list[Member]:
        return [m for m in self.members if m.live]

    def start_member(self, bootstrap: str) -> Member:
        m = Member(f"m{len(self.members) + 1}",
                   [bootstrap, self.topic, self.group, self.protocol], self.workdir,
                   self.history, self.lock)
        self.members.append(m)
        return m

    def wait_balanced(self, what: str, bound_s: float) -> None:
        deadline = time.monotonic() + bound_s
        while time.monotonic() < deadline:
            for m in self.live():
                if m.proc.poll() is not None:
                    err = (self.workdir / f"{m.name}.err").read_text(errors="replace")
                    raise RuntimeError(f"{what}: member {m.name} exited (rc "
                                       f"{m.proc.returncode}): {err[-1500:]}")
            with self.lock:
                if balanced((m.owned for m in self.live()), self.args.partitions):
                    return
            time.sleep(0.02)
        with self.lock:
            owned = {m.name: sorted(m.owned or ()) for m in self.live()}
        self.never.append(f"{what}: not balanced within {bound_s:.0f} s ({owned})")
        print(f"  {what}: NOT balanced within {bound_s:.0f} s: {owned}", file=sys.stderr)

    def event(self, name: str, ns: int, bound_s: float = JOIN_BOUND_S) -> None:
        self.events.append(Event(name, ns))
        self.wait_balanced(name, bound_s)
        time.sleep(self.args.hold)

    def script(self, bootstrap: str) -> None:
        self.form_ns = self.start_member(bootstrap).wait_started()
        self.wait_balanced("form", JOIN_BOUND_S)
        self.producer = Producer(bootstrap, self.topic, self.args.partitions, self.rate,
                                 self.workdir)
        time.sleep(self.args.warmup)
        self.event("steady", time.time_ns())
        n = self.args.members
        for k in range(2, n + 1):
            self.event(f"join {k}/{n}", self.start_member(bootstrap).wait_started())
        while len(self.live()) > 2:
            k = len(self.live())
            self.event(f"leave {k}->{k - 1}", self.live()[-1].end(signal.SIGTERM))
        if len(self.live()) == 2:
            self.event("kill 2->1", self.live()[0].end(signal.SIGKILL),
                       self.args.session_ms / 1000 + JOIN_BOUND_S)

    def execute(self) -> dict:
        cpu0 = machine.cpu_times()
        broker = EmbeddedBroker(
            data_dir=self.workdir / "data", log_path=self.workdir / "broker.log",
            extra_args=["--group-consumer-heartbeat-interval-ms", str(self.args.heartbeat_ms),
                        "--group-consumer-session-timeout-ms", str(self.args.session_ms)])
        with broker:
            assert broker.bootstrap is not None
            broker.create_topics({self.topic: self.args.partitions})
            try:
                self.script(broker.bootstrap)
                end_ns = time.time_ns()
                assert self.producer is not None
                sent = self.producer.stop()
                with WireClient(broker.bootstrap, timeout=30) as c:
                    ends = {p: offsets(c, self.topic, p)[1]
                            for p in range(self.args.partitions)}
                committed = wait_committed(broker.bootstrap, self.group, self.topic, ends)
            finally:
                if self.producer is not None:
                    self.producer.stop()
                for m in self.members:
                    if m.live:
                        m.end(signal.SIGTERM)
                rcs = {m.name: m.reap() for m in self.members}
        failed = {m.name: (self.workdir / f"{m.name}.err").read_text(errors="replace")[-800:]
                  for m in self.members if rcs[m.name] not in (0, -signal.SIGKILL)}
        consumed = Consumed.of(load(m.records for m in self.members))
        missing = consumed.missing(ends)
        figures = event_figures(consumed, self.history, self.events, self.events[0].ns,
                                end_ns, self.args.partitions)
        form = [Event("form", self.form_ns)]
        form_figures = event_figures(consumed, self.history, form, self.form_ns,
                                     self.events[0].ns, self.args.partitions)[0]
        return {
            "protocol": self.protocol, "rate": self.rate, "form_s": form_figures["balanced_s"],
            "events": figures, "records_produced": sum(ends.values()),
            "producer": sent, "records_lost": sum(missing.values()), "missing": missing,
            "committed_at_end_equals_ends": committed == ends,
            "duplicates": int((~consumed.first).sum()), "overlaps": overlaps(self.history),
            "not_balanced": self.never, "member_exit_codes": rcs,
            "member_errors": failed,
            "per_second": per_second(consumed, self.events[0].ns, end_ns),
            "cpu_busy_during": machine.busy_since(cpu0),
        }


class Producer:
    """The paced producer process (``bench._paced_producer``)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, rate: int,
                 workdir: Path) -> None:
        with open(workdir / "producer.err", "wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "bench._paced_producer", bootstrap, topic,
                 str(partitions), str(rate)],
                stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL, text=True,
                cwd=ROOT)
        self.result: dict | None = None

    def stop(self) -> dict:
        if self.result is not None:
            return self.result
        self.proc.send_signal(signal.SIGTERM)
        try:
            out, _ = self.proc.communicate(timeout=90)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, _ = self.proc.communicate(timeout=30)
        words = (out or "").split()
        self.result = ({k.lower(): int(v) for k, v in zip(words[::2], words[1::2],
                                                           strict=True)}
                       if len(words) == 6 else {"error": f"rc {self.proc.returncode}: {out!r}"})
        return self.result


def wait_committed(bootstrap: str, group: str, topic: str,
                   ends: dict[int, int]) -> dict[int, int]:
    """The group's committed offsets once they reach ``ends`` (the last member has read
    and auto-committed everything), or as they are after ``DRAIN_BOUND_S``."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    request = ck.ConsumerGroupTopicPartitions(
        group, [ck.TopicPartition(topic, p) for p in ends])
    deadline = time.monotonic() + DRAIN_BOUND_S
    committed: dict[int, int] = {}
    while time.monotonic() < deadline:
        got = admin.list_consumer_group_offsets([request])[group].result(timeout=10)
        committed = {tp.partition: tp.offset for tp in got.topic_partitions}
        if committed == ends:
            break
        time.sleep(0.5)
    return committed


def med(values: list) -> float | None:
    """The median of the values there are (a never-balanced event has none)."""
    present = [v for v in values if v is not None]
    return round(statistics.median(present), 3) if present else None


def summarize(runs: list[dict]) -> dict:
    """Medians over the repeats, per protocol and rate, per event."""
    out: dict = {}
    for key in sorted({(r["protocol"], r["rate"]) for r in runs}):
        same = [r for r in runs if (r["protocol"], r["rate"]) == key]
        events: dict = {}
        for name in [e["event"] for e in same[0]["events"]]:
            figs = [e for r in same for e in r["events"] if e["event"] == name]
            events[name] = {
                "balanced_s": med([f["balanced_s"] for f in figs]),
                "longest_gap_ms": med([f["longest_gap_ms"] for f in figs]),
                "p50_ms": med([f["latency"]["p50_ms"] for f in figs]),
                "p99_ms": med([f["latency"]["p99_ms"] for f in figs]),
                "max_ms": med([f["latency"]["max_ms"] for f in figs]),
                "duplicates": [f["duplicates"] for f in figs]}
        out[f"{key[0]} @ {key[1]}/s"] = {
            "runs": len(same), "form_s": med([r["form_s"] for r in same]),
            "records_lost": [r["records_lost"] for r in same],
            "committed_at_end_equals_ends": [r["committed_at_end_equals_ends"] for r in same],
            "overlaps": [r["overlaps"] for r in same], "events": events}
    return out


def parse(argv: list[str] | None) -> argparse.Namespace | None:
    ap = argparse.ArgumentParser(prog="bench.broker_group_churn", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--protocols", default=",".join(PROTOCOLS),
                    help=f"comma-separated, of {', '.join(PROTOCOLS)}")
    ap.add_argument("--rates", default="2000,10000", help="records/s, comma-separated")
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--members", type=int, default=4, help="joins up to this many")
    ap.add_argument("--hold", type=float, default=4.0,
                    help="seconds each event's window lasts after the group is balanced")
    ap.add_argument("--warmup", type=float, default=2.0)
    ap.add_argument("--heartbeat-ms", type=int, default=1000,
                    help="the broker's --group-consumer-heartbeat-interval-ms (KIP-848); "
                         "classic members heartbeat every 1000 ms too")
    ap.add_argument("--session-ms", type=int, default=6000,
                    help="the broker's --group-consumer-session-timeout-ms (KIP-848); "
                         "classic members' session.timeout.ms is 6000")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quiet-wait", type=float, default=30.0,
                    help="before each run, wait up to this many seconds for the CPUs to be "
                         "< 30%% busy (other suites share them); 0 = don't wait")
    ap.add_argument("--quick", action="store_true",
                    help="smoke form: KIP-848 only, 2,000/s, 2 members, 1 s holds, 1 run")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    if args.quick:
        args.protocols, args.rates, args.members, args.hold = "consumer", "2000", 2, 1.0
        args.warmup, args.repeats, args.quiet_wait = 1.0, 1, 0.0
    if args.out is None:
        args.out = OUT.with_suffix(".quick.json") if args.quick else OUT
    try:
        args.protocols = [p for p in args.protocols.split(",") if p]
        args.rates = [int(r) for r in args.rates.split(",") if r]
    except ValueError:
        args.rates = []
    problem = (
        "--protocols must name " + "/".join(PROTOCOLS)
        if not args.protocols or set(args.protocols) - set(PROTOCOLS) else
        "--rates must be positive integers" if not args.rates or min(args.rates) < 1 else
        "--members must be >= 2" if args.members < 2 else
        "--partitions must be >= --members" if args.partitions < args.members else
        "--repeats must be >= 1" if args.repeats < 1 else None)
    if problem:
        print(f"bench.broker_group_churn: {problem}", file=sys.stderr)
        return None
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args is None:
        return 2
    started, load_start = time.monotonic(), os.getloadavg()[0]
    runs = []
    for _ in range(args.repeats):
        for rate in args.rates:
            for protocol in args.protocols:
                busy = machine.wait_for_quiet(args.quiet_wait) if args.quiet_wait > 0 else None
                with tempfile.TemporaryDirectory(prefix="churn-") as tmp:
                    print(f"churn: {protocol} at {rate}/s ...", file=sys.stderr, flush=True)
                    run = Run(protocol, rate, args, Path(tmp)).execute()
                run.update(cpu_busy_before=busy, load_avg=os.getloadavg()[0])
                runs.append(run)
                print("  " + "; ".join(
                    f"{e['event']} {e['balanced_s']} s gap {e['longest_gap_ms']} ms p99 "
                    f"{e['latency']['p99_ms']} dup {e['duplicates']}" for e in run["events"])
                    + f"; lost {run['records_lost']}", file=sys.stderr)
    result = {
        "partitions": args.partitions, "members": args.members, "hold_s": args.hold,
        "heartbeat_ms": args.heartbeat_ms, "session_ms": args.session_ms,
        "clients": f"confluent-kafka {ck.version()[0]} (librdkafka {ck.libversion()[0]}), "
                   "auto-commit every 1 s",
        "summary": summarize(runs), "runs": runs}
    machine.write_result(args.out, result, started, load_start)
    lost = sum(r["records_lost"] for r in runs)
    print(f"churn: {len(runs)} runs, records lost {lost}", file=sys.stderr)
    return 1 if lost or any(r["not_balanced"] for r in runs) else 0


if __name__ == "__main__":
    sys.exit(main())
