"""The highest event rate 1, 1,000 and 10,000 rules each sustain in their steady state.

Why its own bench: ``bench.rules_scale --throughput steady`` starts a fresh appliance for
every probed rate (a JVM start, a warm-up, a minute of load: hours for the six cells on
this machine), so it was never run. Here each cell (rule count x trigger) is ONE fresh
``appliance run`` with a generated rules file (``bench._rule_sets``), and a ladder of
rates on it, each step a fresh warm Java driver (``bench.appliance_latency.Driver``)
sending open-loop for ``--step`` seconds:

1. **baseline**: ``--baseline-rate`` for ``--baseline`` seconds; the cell's own steady p99
   is the median of the per-second p99s from ``--settle`` seconds on (the first seconds
   after ``ready`` are the JIT's, not the steady state);
2. **steps**: ``--start``, then each ``--factor`` times the last, at most ``--steps`` of
   them; a step is **sustained** when the median of its per-second p99s over its last
   ``--tail`` seconds is at most ``STEADY_FACTOR`` (2) times the baseline's, no alert is
   lost and the driver kept its schedule (``bench.appliance_throughput.SEND_OVERRUN_MAX``).
   The ladder stops at the first step that is not (its backlog would carry into the next).
   When the very first step fails, the ladder steps **down** instead (each ``--factor``
   times below the last, while above the baseline's rate) until one is sustained, so a
   cell whose edge lies under ``--start`` still gets a figure.

A cell's figure is its highest sustained rate (None when even ``--start`` failed), and each
count's ratio to one rule's in the same trigger (the rules-at-scale target: 10,000 rules at
least half of one rule's rate). The resolution is the ladder's factor: the true edge lies
between the figure and the next step. Each cell's ``run -> ready`` is recorded too (a fresh
start with that many rules). The bound on the time is printed before anything runs.

    .venv/bin/python -m bench.rules_throughput                         # the six cells
    .venv/bin/python -m bench.rules_throughput --counts 1 --triggers continuous --steps 2
    .venv/bin/python -m bench.rules_throughput --triggers realtime --runs 3   # medians

With ``--runs N`` every cell runs N times, each a fresh appliance, the rounds interleaved
(every cell once, then every cell again) so a noisy minute does not land on one cell; a
cell's figure is then the median of its runs' (a run with no sustained step counts as 0),
its ``ready`` the median of its runs', and each run's figure is kept beside it.

Writes ``reports/bench/rules_throughput.{json,md}``.
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

from appliance.broker import EmbeddedBroker
from appliance.config import TopicsConfig
from appliance.process import process_group
from appliance.process.logwatch import wait_for_event
from appliance.topics import default_partitions
from bench import _rule_sets as rule_sets
from bench._cells import Cell
from bench._java import compile_driver
from bench._machine import write_result
from bench.appliance_latency import (
    DRAIN_S,
    DRIVER_WARMUP_S,
    READY_TIMEOUT_S,
    ROOT,
    Driver,
    write_config,
)
from bench.appliance_throughput import SEND_OVERRUN_MAX

OUT = ROOT / "reports" / "bench" / "rules_throughput.json"
COUNTS = (1, 1000, 10000)
TRIGGERS = ("continuous", "realtime")
STEADY_FACTOR = 2.0          # a sustained step's p99 at most this times the baseline's
TARGET_RATIO = {10000: 0.5}  # the rules-at-scale issue: 10,000 rules >= 50% of one rule's
STEP_OVERHEAD_S = 10.0       # a step's driver JVM, its own warm-up and a quick drain
START_OVERHEAD_S = 45.0      # a fresh appliance to ready, and its stop


@dataclass(frozen=True)
class Ladder:
    baseline_rate: int = 5_000
    baseline_s: float = 40.0
    settle_s: float = 20.0
    start: int = 10_000
    factor: float = 1.5
    steps: int = 8
    step_s: float = 20.0
    tail_s: float = 10.0

    def rate(self, k: int) -> int:
        """Step ``k`` of the ladder (negative: below ``start``), rounded to thousands."""
        return int(round(self.start * self.factor ** k, -3))

    def rates(self) -> list[int]:
        return [self.rate(k) for k in range(self.steps)]

    def rates_down(self) -> list[int]:
        """The rates tried below ``start`` when it fails: each ``factor`` times below the
        last, while still above the baseline's rate (which is sustained by definition)."""
        return list(itertools.takewhile(lambda r: r > self.baseline_rate,
                                        (self.rate(-k) for k in itertools.count(1))))

    def bound_s(self) -> float:
        """The most one cell can take (every step run, every drain at its bound)."""
        tried = max(self.steps, 1 + len(self.rates_down()))
        return (START_OVERHEAD_S + self.baseline_s + STEP_OVERHEAD_S
                + tried * (self.step_s + STEP_OVERHEAD_S)
                + DRAIN_S)  # at most one step drains in full: the ladder stops after it


def climb(ladder: Ladder, attempt) -> list[Step]:
    """The steps ``attempt(rate) -> Step`` is asked for: up the ladder to its first failed
    step; when that is the very first, down from it to the first sustained one."""
    steps: list[Step] = []
    for rate in ladder.rates():
        steps.append(attempt(rate))
        if not steps[-1].sustained:
            break
    if steps and not steps[0].sustained:
        for rate in ladder.rates_down():
            steps.append(attempt(rate))
            if steps[-1].sustained:
                break
    return steps


@dataclass(frozen=True)
class Step:
    rate: int
    sustained: bool
    p99_ms: float | None    # median per-second p99 over the judged seconds
    alerts_lost: int | None
    send_s: float | None
    why: str                # what failed ("" when sustained)


def _median_p99(result: dict, from_s: float) -> float | None:
    p99s = [s["p99"] for s in result.get("per_second", [])
            if s["count"] > 0 and s["second"] >= from_s]
    return round(statistics.median(p99s), 3) if p99s else None


def judge(rate: int, result: dict, ladder: Ladder, bound_ms: float | None) -> Step:
    """One step's verdict from the driver's result (or ``{"error": ...}``); ``bound_ms``
    None: the baseline, judged only on alerts and the driver's schedule."""
    if "error" in result:
        return Step(rate, False, None, None, None, f"run failed: {result['error'][:200]}")
    seconds = ladder.baseline_s if bound_ms is None else ladder.step_s
    p99 = _median_p99(result, ladder.settle_s if bound_ms is None
                      else seconds - ladder.tail_s)
    why = []
    if result["send_s"] > seconds * (1 + SEND_OVERRUN_MAX):
        why.append(f"driver sent for {result['send_s']:g} s instead of {seconds:g}")
    if p99 is None:
        why.append("no alert in the judged seconds")
    elif bound_ms is not None and p99 > bound_ms:
        why.append(f"p99 {p99:g} ms over {bound_ms:g} ms")
    if result["alerts_lost"]:
        why.append(f"{result['alerts_lost']} alerts lost")
    return Step(rate, not why, p99, result["alerts_lost"], result["send_s"], "; ".join(why))


class RunningAppliance:
    """A fresh ``appliance run`` on ``broker`` with ``count`` generated rules, until closed."""

    def __init__(self, trigger: str, count: int, broker, workdir: Path,
                 ready_timeout: float) -> None:
        tag = f"{trigger}-{count}-{uuid.uuid4().hex[:6]}"
        self.topics = {"events": f"{tag}-events", "alerts": f"{tag}-alerts",
                       "dead_letters": f"{tag}-dlq"}
        partitions = default_partitions(TopicsConfig(**self.topics))
        broker.create_topics(partitions)
        self.partitions = partitions[self.topics["events"]]
        self.cell = Cell(f"{trigger}-{count}-rules", trigger, 0, rules=count)
        rules = rule_sets.rules_file(count, workdir / "rules.yml")
        checkpoint = Path(tempfile.mkdtemp(prefix="bench-cp-", dir=workdir))
        config = write_config(self.cell, broker.bootstrap, self.topics, workdir, checkpoint,
                              rules)
        self.log = workdir / f"{self.cell.name}.log"
        env = {k: v for k, v in os.environ.items() if not k.startswith("APPLIANCE_")}
        spawned = time.monotonic()
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "appliance", "run", "--config", str(config)],
                stdout=out, stderr=subprocess.STDOUT, env=env, cwd=ROOT,
                start_new_session=True)
        try:
            wait_for_event(self.log, "appliance.ready", self.proc, ready_timeout, poll=0.05)
        except BaseException:
            self.close()
            raise
        self.ready_s = round(time.monotonic() - spawned, 2)

    def close(self) -> None:
        process_group.stop(self.proc, grace=90)


def run_cell(trigger: str, count: int, ladder: Ladder, cp: str, workdir: Path,
             ready_timeout: float) -> dict:
    """One fresh appliance: its baseline, then the ladder up to its first failed step."""
    steps: list[Step] = []
    with EmbeddedBroker() as broker:
        broker.create_topics({"appliance.warmup": 2})
        app = RunningAppliance(trigger, count, broker, workdir, ready_timeout)
        try:
            def drive(rate: int, seconds: float) -> dict:
                try:
                    with Driver(cp, broker, app.topics, rate, seconds, app.partitions,
                                workdir) as driver:
                        return driver.measure()
                except Exception as exc:  # noqa: BLE001 - a failed step is a failed rate
                    return {"error": str(exc)}

            base = judge(ladder.baseline_rate, drive(ladder.baseline_rate, ladder.baseline_s),
                         ladder, None)
            _say(f"{trigger} {count:,} rules: ready {app.ready_s} s; baseline "
                 f"{base.rate:,}/s p99 {base.p99_ms} ms {base.why}")
            bound = STEADY_FACTOR * base.p99_ms if base.sustained and base.p99_ms else None

            def attempt(rate: int) -> Step:
                assert bound is not None
                step = judge(rate, drive(rate, ladder.step_s), ladder, bound)
                _say(f"{trigger} {count:,} rules at {rate:,}/s: "
                     f"{'sustained' if step.sustained else 'NOT sustained'}, p99 "
                     f"{step.p99_ms} ms (bound {bound:g}) {step.why}")
                return step

            if bound is not None:
                steps = climb(ladder, attempt)
        finally:
            app.close()
    return {"trigger": trigger, "rules": count, "ready_s": app.ready_s,
            "baseline": asdict(base), "p99_bound_ms": bound,
            "max_sustained": max((s.rate for s in steps if s.sustained), default=None),
            "steps": [asdict(s) for s in steps]}


def summarize(runs: list[dict]) -> dict:
    """One cell from its runs (the same trigger and count): the median highest sustained
    rate (the lower median for an even count; a run with none counts as 0, so a cell whose
    runs mostly failed has no figure), the median ``ready``, baseline p99 and bound, and
    every run kept under ``runs``."""
    if len(runs) == 1:
        return {**runs[0], "runs": runs}

    def median(values) -> float | None:
        present = [v for v in values if v is not None]
        return round(statistics.median(present), 3) if present else None

    best = statistics.median_low([r["max_sustained"] or 0 for r in runs])
    return {"trigger": runs[0]["trigger"], "rules": runs[0]["rules"],
            "ready_s": median(r["ready_s"] for r in runs),
            "baseline": {"p99_ms": median(r["baseline"]["p99_ms"] for r in runs)},
            "p99_bound_ms": median(r["p99_bound_ms"] for r in runs),
            "max_sustained": best or None, "steps": [], "runs": runs}


def first_failed(cell: dict) -> dict | None:
    """The lowest step above the cell's figure that was not sustained."""
    best = cell["max_sustained"] or 0
    return min((s for s in cell["steps"] if not s["sustained"] and s["rate"] > best),
               key=lambda s: s["rate"], default=None)


def _say(line: str) -> None:
    print(f"bench: {line}", file=sys.stderr, flush=True)


def with_ratios(cells: list[dict]) -> list[dict]:
    """Each cell with its rate as a ratio to one rule's in the same trigger."""
    one = {c["trigger"]: c["max_sustained"] for c in cells if c["rules"] == 1}
    out = []
    for c in cells:
        base = one.get(c["trigger"])
        ratio = (round(c["max_sustained"] / base, 2)
                 if c["max_sustained"] and base else None)
        met = (ratio >= TARGET_RATIO[c["rules"]]
               if ratio is not None and c["rules"] in TARGET_RATIO else None)
        out.append({**c, "ratio_to_one_rule": ratio, "target_met": met})
    return out


def markdown(doc: dict) -> str:
    lines = [f"# Rules throughput\n\n`{doc['command']}`\n\n{doc['note']}\n",
             "| trigger | rules | ready s | baseline p99 ms | bound ms | highest sustained/s "
             "(x 1 rule) | first failed step |",
             "|---|---:|---:|---:|---:|---:|---|"]
    for c in doc["cells"]:
        best = c["max_sustained"]
        best_s = "-" if best is None else f"{best:,}"
        ratio = f" (x{c['ratio_to_one_rule']})" if c["ratio_to_one_rule"] is not None else ""
        fail = "; ".join(f"{f['rate']:,}/s: {f['why']}" if f else "-"
                         for f in map(first_failed, c["runs"]))
        if len(c["runs"]) > 1:
            best_s += " (runs: " + ", ".join(f"{r['max_sustained'] or 0:,}"
                                            for r in c["runs"]) + ")"
        lines.append(f"| {c['trigger']} | {c['rules']:,} | {c['ready_s']} | "
                     f"{c['baseline']['p99_ms']} | {c['p99_bound_ms']} | {best_s}{ratio} | "
                     f"{fail} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.rules_throughput", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    d = Ladder()
    parser.add_argument("--counts", type=int, nargs="+", default=list(COUNTS))
    parser.add_argument("--triggers", nargs="+", default=list(TRIGGERS), choices=TRIGGERS)
    parser.add_argument("--baseline-rate", type=int, default=d.baseline_rate)
    parser.add_argument("--baseline", type=float, default=d.baseline_s,
                        help="seconds at the baseline rate (default: %(default)s)")
    parser.add_argument("--settle", type=float, default=d.settle_s,
                        help="baseline seconds skipped before its steady p99")
    parser.add_argument("--start", type=int, default=d.start, help="the first step's rate")
    parser.add_argument("--factor", type=float, default=d.factor,
                        help="each step's rate over the last's (default: %(default)s)")
    parser.add_argument("--steps", type=int, default=d.steps, help="at most this many steps")
    parser.add_argument("--step", type=float, default=d.step_s, help="seconds per step")
    parser.add_argument("--tail", type=float, default=d.tail_s,
                        help="a step's last seconds its p99 is judged on")
    parser.add_argument("--runs", type=int, default=1,
                        help="fresh runs per cell, interleaved; the figure is their median")
    parser.add_argument("--ready-timeout", type=float, default=READY_TIMEOUT_S)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args([] if argv is None else argv)
    ladder = Ladder(args.baseline_rate, args.baseline, args.settle, args.start, args.factor,
                    args.steps, args.step, args.tail)
    if (min(args.counts) < 1 or ladder.steps < 1 or ladder.factor <= 1 or args.runs < 1
            or not 0 < ladder.settle_s < ladder.baseline_s
            or not 0 < ladder.tail_s <= ladder.step_s):
        print("bench.rules_throughput: counts >= 1, runs >= 1, steps >= 1, factor > 1, "
              "0 < --settle < --baseline, 0 < --tail <= --step", file=sys.stderr)
        return 2
    counts = sorted(set(args.counts))
    cells = [(t, c) for t in args.triggers for c in counts]
    bound = args.runs * len(cells) * ladder.bound_s()
    _say(f"{len(cells)} cells x {args.runs} runs, "
         f"steps {', '.join(f'{r:,}' for r in ladder.rates())}/s: "
         f"at most {bound / 60:.0f} min (driver warm-up {DRIVER_WARMUP_S:g} s a step)")
    cp = compile_driver("AlertLatencyBench.java")
    started, load0 = time.monotonic(), os.getloadavg()[0]
    by_cell: dict[tuple[str, int], list[dict]] = {cell: [] for cell in cells}
    with tempfile.TemporaryDirectory(prefix="bench-rules-throughput-") as tmp:
        for round_no, (trigger, count) in itertools.product(range(args.runs), cells):
            workdir = Path(tempfile.mkdtemp(dir=tmp))
            _say(f"run {round_no + 1} of {args.runs}: {trigger}, {count:,} rules")
            try:
                by_cell[trigger, count].append(run_cell(trigger, count, ladder, cp, workdir,
                                                        args.ready_timeout))
            except Exception as exc:  # noqa: BLE001 - one failed run is one run's gap
                _say(f"{trigger} {count:,} rules failed: {exc}")
    results = [summarize(runs) for runs in by_cell.values() if runs]
    complete = all(len(runs) == args.runs for runs in by_cell.values())
    command = "python -m bench.rules_throughput " + " ".join(argv or [])
    doc = {"benchmark": "rules_throughput", "command": command.strip(),
           "note": (f"one fresh appliance per cell and run ({args.runs} runs, interleaved; "
                    f"a cell's figure is its runs' median); "
                    f"baseline {ladder.baseline_rate:,}/s for "
                    f"{ladder.baseline_s:g} s (steady p99 from second {ladder.settle_s:g}); "
                    f"steps of {ladder.step_s:g} s from {ladder.start:,}/s x{ladder.factor:g}, "
                    f"sustained: median per-second p99 of the last {ladder.tail_s:g} s <= "
                    f"{STEADY_FACTOR:g}x the baseline's, no alert lost, driver on time; "
                    f"load average {load0:.1f} at the start"),
           "ladder": asdict(ladder), "cells": with_ratios(results)}
    write_result(args.out, doc, started, load0)
    args.out.with_suffix(".md").write_text(markdown(doc))
    print(markdown(doc))
    return 0 if complete else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
