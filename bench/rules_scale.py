"""How start-up, checking, latency, throughput and a live swap grow with the rule count.

Operators keep thousands of rules. Each cell here is what a user runs: a generated rules
file of N rules (``bench._rule_sets``: the shipped ``cpu-critical`` rule and N-1 equality +
threshold rules over 200 metric names, a third with a LIKE on the source; the driver's
events are candidates for about one rule in 200), in each trigger mode:

- ``rules check``: a fresh ``appliance rules check FILE`` (no JVM), wall time;
- ``run -> ready``, steady p99 at ``--rate`` events/s, the longest wait around a live
  rules swap (the file gains a rule and the appliance gets SIGHUP at ``--reload-at``), and
  the swap's own gap: one ``bench.appliance_latency`` cell (a fresh ``appliance run``,
  the warmed Java driver open-loop from ``ready``);
- throughput, off by default: ``bench.rules_throughput`` searches it with one appliance per
  rule count and trigger (a ladder of rates on it), in about half an hour for the six
  cells. ``--throughput steady`` here: for each of ``THROUGHPUT_COUNTS``
  among the counts, the highest rate it sustains with its per-second p99 over the probe's
  last seconds at most ``STEADY_FACTOR`` times its own steady p99 (from its latency cells
  above), no alert lost and the driver on time: doubling then bisecting as
  ``bench.appliance_throughput`` searches; each count's rate also as a ratio to one
  rule's (the target: ``THROUGHPUT_TARGETS``). ``targets``: the 1-rule maximum (lag
  bounded at 1 s), then the larger counts probed at the targets' fractions of it;
  ``search``: each count's own maximum with the lag bound; ``off`` (the default) skips
  it. Every mode here probes each rate on a fresh appliance: hours on two cores.

Medians of ``--runs`` fresh runs (cells in rounds), each figure also as a ratio to the
1-rule cell of the same trigger.

    .venv/bin/python -m bench.rules_scale                               # everything (~1 h)
    .venv/bin/python -m bench.rules_scale --counts 1 1000 --triggers continuous \\
        --runs 1 --seconds 30 --throughput off                           # a smoke run

Writes ``reports/bench/rules_scale.{json,md}``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from appliance.broker import EmbeddedBroker
from appliance.trigger import TRIGGERS
from bench import _rule_sets as rule_sets
from bench._cells import RATE, Cell
from bench._java import compile_driver
from bench._machine import write_result
from bench.appliance_latency import READY_TIMEOUT_S, ROOT, derive, run_appliance_cell
from bench.appliance_throughput import Limits, Probe, judge, search

OUT = ROOT / "reports" / "bench" / "rules_scale.json"
COUNTS = (1, 100, 1000, 10000)
#: Targets (the rules-at-scale issue), as ratios to the 1-rule cell of the same trigger.
LATENCY_TARGETS = {1000: 1.5, 10000: 2.0}          # steady p99 at most this many times
THROUGHPUT_TARGETS = {1000: 0.8, 10000: 0.5}      # sustained rate at least this fraction
READY_TARGET_S = 10.0                              # run -> ready at most this much more
#: ``--throughput steady``: the counts searched, and how far above its own steady p99 a
#: count's per-second p99 may be at a rate it sustains.
THROUGHPUT_COUNTS = (1, 1000, 10000)
STEADY_FACTOR = 2.0
CHECK_TARGETS_S = {1000: 3.0, 10000: 15.0}         # rules check at most
SWAP_WAIT_TARGET_MS = 1000.0                       # no event waits longer around a swap


def check_seconds(count: int, workdir: Path, runs: int) -> list[float]:
    """Wall seconds of a fresh ``appliance rules check`` on a ``count``-rule file."""
    path = rule_sets.rules_file(count, workdir / f"check-{count}.yml")
    out = []
    for _ in range(runs):
        started = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "appliance", "rules", "check", str(path)],
                              capture_output=True, text=True, cwd=ROOT)
        if done.returncode != 0:
            raise RuntimeError(f"rules check of {count} rules failed: {done.stderr[-500:]}")
        out.append(round(time.monotonic() - started, 3))
    return out


def _median(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return round(statistics.median(values), 3) if values else None


def latency_runs(trigger: str, count: int, args, cp: str, workdir: Path) -> list[dict]:
    cell = Cell(f"{trigger}-{count}-rules", trigger, args.rate, rules=count,
                reload_at_s=args.reload_at, why=f"{count} rules")
    with EmbeddedBroker() as broker:
        broker.create_topics({"appliance.warmup": 2})
        result = run_appliance_cell(cell, cp, broker, args.seconds,
                                    Path(tempfile.mkdtemp(dir=workdir)), args.ready_timeout)
    figures = derive(result)
    swap = result.get("reload") or {}
    reload = swap.get("reloaded") or {}
    if not reload:  # a swap that did not happen is no figure: the run says why
        print(f"bench: {cell.name}: no rules.reloaded after the SIGHUP at "
              f"{swap.get('signalled_s')} s; rejected: {swap.get('rejected')}",
              file=sys.stderr, flush=True)
    return [{**figures, "swap_missing": not reload, "swap_rejected": swap.get("rejected"),
             "swap_seconds": reload.get("seconds"), "in_effect_s": reload.get("in_effect_s"),
             "compile_s": reload.get("compile_s"), "per_second": result.get("per_second"),
             "startup_s": result.get("appliance_startup_s")}]


def _probe_at(trigger: str, count: int, args, cp: str, workdir: Path, limits: Limits,
              decide) -> object:
    """A probe function for ``search``: one fresh appliance run of ``count`` rules at a rate,
    judged by ``decide(rate, result)``."""
    def probe(rate: int) -> Probe:
        cell = Cell(f"{trigger}-{count}-rules", trigger, rate, rules=count)
        with EmbeddedBroker() as broker:
            broker.create_topics({"appliance.warmup": 2})
            try:
                result = run_appliance_cell(cell, cp, broker, limits.seconds,
                                            Path(tempfile.mkdtemp(dir=workdir)),
                                            args.ready_timeout)
            except Exception as exc:  # noqa: BLE001 - a failed probe is a failed rate
                result = {"error": str(exc)}
        verdict = decide(rate, result)
        print(f"bench: {trigger} {count} rules at {rate:,}/s: "
              f"{'sustained' if verdict.sustained else 'NOT sustained'} {verdict.why}",
              file=sys.stderr, flush=True)
        return verdict
    return probe


def steady_judge(rate: int, result: dict, limits: Limits, bound_ms: float) -> Probe:
    """``judge``'s verdict (driver on time, alerts all there), and the median per-second p99
    of the probe's last ``tail_s`` seconds at most ``bound_ms``: the rate holds the count's
    steady state, not only a bounded lag."""
    base = judge(rate, result, replace(limits, bound_ms=float("inf")))
    if not base.sustained:
        return base
    start = limits.seconds - limits.tail_s
    tail = [x["p99"] for x in result["per_second"] if x["count"] > 0 and x["second"] >= start]
    p99 = statistics.median(tail)
    if p99 > bound_ms:
        return replace(base, sustained=False,
                       why=f"p99 {p99:g} ms in the last {limits.tail_s} s, over {bound_ms:g}")
    return base


def steady_throughput(trigger: str, counts: list[int], args, cp: str, workdir: Path,
                      steady_p99: dict[int, float | None]) -> dict:
    """Per count of ``THROUGHPUT_COUNTS``: the highest rate with p99 at most
    ``STEADY_FACTOR`` times the count's own steady p99, and its ratio to one rule's."""
    limits = Limits(seconds=args.throughput_seconds)
    out: dict = {}
    for count in [c for c in counts if c in THROUGHPUT_COUNTS]:
        steady = steady_p99.get(count)
        if not steady:
            out[str(count)] = {"max_sustained": None, "why": "no steady p99 to bound by"}
            continue
        bound = STEADY_FACTOR * steady

        def decide(rate: int, result: dict, bound: float = bound) -> Probe:
            return steady_judge(rate, result, limits, bound)

        probes = search(_probe_at(trigger, count, args, cp, workdir, limits, decide), limits)
        out[str(count)] = {"max_sustained": max((p.rate for p in probes if p.sustained),
                                                default=None),
                           "p99_bound_ms": round(bound, 3),
                           "probes": [{"rate": p.rate, "sustained": p.sustained,
                                       "why": p.why} for p in probes]}
    one = out.get("1", {}).get("max_sustained")
    for row in out.values():
        rate = row.get("max_sustained")
        row["ratio"] = round(rate / one, 3) if rate and one else None
    return out


def throughput(trigger: str, counts: list[int], args, cp: str, workdir: Path) -> dict:
    """The 1-rule maximum (a search), then each larger count at its target fraction (or
    its own search with ``--throughput search``)."""
    limits = Limits(seconds=args.throughput_seconds)

    def probe_at(count: int):
        return _probe_at(trigger, count, args, cp, workdir, limits,
                         lambda rate, result: judge(rate, result, limits))

    base_probes = search(probe_at(counts[0]), limits)
    best = max((p.rate for p in base_probes if p.sustained), default=None)
    out: dict = {str(counts[0]): {"max_sustained": best}}
    for count in counts[1:]:
        if args.throughput == "search":
            probes = search(probe_at(count), limits)
            rate = max((p.rate for p in probes if p.sustained), default=None)
            out[str(count)] = {"max_sustained": rate,
                               "ratio": round(rate / best, 3) if rate and best else None}
        elif best and count in THROUGHPUT_TARGETS:
            rate = int(best * THROUGHPUT_TARGETS[count])
            verdict = probe_at(count)(rate)
            out[str(count)] = {"probed_rate": rate, "fraction": THROUGHPUT_TARGETS[count],
                               "sustained": verdict.sustained, "why": verdict.why}
    return out


def summarize(rows: dict, checks: dict, throughputs: dict) -> dict:
    table = []
    for (trigger, count), runs in rows.items():
        base = rows.get((trigger, min(c for t, c in rows if t == trigger)))
        med = {k: _median([r.get(k) for r in runs]) for k in (
            "run_to_ready_s", "steady_p99", "p99", "worst_second_p99", "swap_window_max",
            "swap_gap_s", "swap_seconds", "in_effect_s", "compile_s", "alerts_lost")}
        base_med = {k: _median([r.get(k) for r in base]) for k in (
            "run_to_ready_s", "steady_p99")} if base else {}
        ratio = (round(med["steady_p99"] / base_med["steady_p99"], 2)
                 if med["steady_p99"] and base_med.get("steady_p99") else None)
        ready_more = (round(med["run_to_ready_s"] - base_med["run_to_ready_s"], 2)
                      if med["run_to_ready_s"] is not None
                      and base_med.get("run_to_ready_s") is not None else None)
        check = _median(checks.get(count, []))
        met = {}
        if count in LATENCY_TARGETS and ratio is not None:
            met["steady_p99_ratio"] = ratio <= LATENCY_TARGETS[count]
        if count in CHECK_TARGETS_S and check is not None:
            met["check_s"] = check <= CHECK_TARGETS_S[count]
        if ready_more is not None and count > 1:
            met["ready_more_s"] = ready_more <= READY_TARGET_S
        if med["swap_window_max"] is not None:
            met["swap_wait"] = med["swap_window_max"] < SWAP_WAIT_TARGET_MS
        tp = throughputs.get(trigger, {}).get(str(count))
        if tp and "sustained" in tp:
            met["throughput"] = tp["sustained"]
        elif tp and tp.get("ratio") is not None and count in THROUGHPUT_TARGETS:
            met["throughput"] = tp["ratio"] >= THROUGHPUT_TARGETS[count]
        table.append({"trigger": trigger, "rules": count, "median": med,
                      "steady_p99_ratio": ratio, "ready_more_s": ready_more,
                      "check_s": check, "throughput": tp, "met": met,
                      "runs": len(runs)})
    return {"cells": table}


def markdown(doc: dict) -> str:
    lines = [f"# Rules at scale\n\n`{doc['command']}`\n\n{doc['note']}\n",
             "| trigger | rules | check s | run->ready s (+ vs 1) | steady p99 ms (x 1 rule) "
             "| worst s p99 ms | swap: longest wait ms | swap gap s | swap done s | throughput "
             "| targets |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for c in doc["summary"]["cells"]:
        m = c["median"]
        tp = c["throughput"] or {}
        if tp.get("max_sustained"):
            tput = f"{tp['max_sustained']:,}/s" + (f" (x{tp['ratio']})" if tp.get("ratio")
                                                   else "")
        elif tp.get("probed_rate"):
            tput = f"{'OK' if tp.get('sustained') else 'NOT'} at {tp['probed_rate']:,}/s"
        else:
            tput = "-"
        more = f" ({c['ready_more_s']:+})" if c["ready_more_s"] is not None else ""
        ratio = f" (x{c['steady_p99_ratio']})" if c["steady_p99_ratio"] is not None else ""
        met = ", ".join(f"{k} {'met' if v else 'MISSED'}" for k, v in c["met"].items()) or "-"
        lines.append(f"| {c['trigger']} | {c['rules']:,} | {c['check_s']} | "
                     f"{m['run_to_ready_s']}{more} | {m['steady_p99']}{ratio} | "
                     f"{m['worst_second_p99']} | {m['swap_window_max']} | {m['swap_gap_s']} | "
                     f"{m['swap_seconds']} | "
                     f"{tput} | {met} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.rules_scale", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--counts", type=int, nargs="+", default=list(COUNTS),
                        help="rule counts, one generated rules file each (default: %(default)s)")
    parser.add_argument("--triggers", nargs="+", default=list(TRIGGERS), choices=TRIGGERS,
                        help="trigger modes (default: all)")
    parser.add_argument("--runs", type=int, default=3,
                        help="fresh appliance runs per cell, medians over them "
                             "(default: %(default)s)")
    parser.add_argument("--seconds", type=float, default=60.0,
                        help="seconds of open-loop load from ready (default: %(default)s)")
    parser.add_argument("--rate", type=int, default=RATE,
                        help="events per second of the latency cells (default: %(default)s)")
    parser.add_argument("--reload-at", type=float, default=40.0,
                        help="seconds after ready the rules are swapped live")
    parser.add_argument("--check-runs", type=int, default=3,
                        help="fresh rules check runs per count (default: %(default)s)")
    parser.add_argument("--throughput", choices=("steady", "targets", "search", "off"),
                        default="off",
                        help="search each of 1, 1,000 and 10,000 rules' highest rate within "
                             "twice its own steady p99, probe the targets' fractions of the "
                             "1-rule maximum, search each count's own maximum with the lag "
                             "bound, each rate a fresh appliance (hours), or skip: "
                             "bench.rules_throughput searches it faster (default: %(default)s)")
    parser.add_argument("--throughput-seconds", type=float, default=30.0,
                        help="seconds per throughput probe (default: %(default)s)")
    parser.add_argument("--ready-timeout", type=float, default=READY_TIMEOUT_S,
                        help="seconds a fresh appliance may take to be ready "
                             "(default: %(default)s)")
    parser.add_argument("--out", type=Path, default=OUT,
                        help="the JSON result; the table beside it as .md (default: %(default)s)")
    args = parser.parse_args([] if argv is None else argv)
    counts = sorted(set(args.counts))
    if counts[0] < 1 or args.runs < 1 or not 0 < args.reload_at < args.seconds:
        print("bench.rules_scale: counts >= 1, runs >= 1, 0 < --reload-at < --seconds",
              file=sys.stderr)
        return 2

    cp = compile_driver("AlertLatencyBench.java")
    started, load0 = time.monotonic(), os.getloadavg()[0]
    rows: dict[tuple[str, int], list[dict]] = {}
    checks: dict[int, list[float]] = {}
    throughputs: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="bench-rules-") as tmp:
        workdir = Path(tmp)
        for count in counts:
            checks[count] = check_seconds(count, workdir, args.check_runs)
            print(f"bench: rules check of {count:,} rules: {checks[count]} s", file=sys.stderr,
                  flush=True)
        for round_ in range(args.runs):
            for trigger in args.triggers:
                for count in counts:
                    print(f"bench: run {round_ + 1}/{args.runs}: {trigger}, {count:,} rules",
                          file=sys.stderr, flush=True)
                    try:
                        runs = latency_runs(trigger, count, args, cp, workdir)
                    except Exception as exc:  # noqa: BLE001 - one failed run is one row's gap
                        print(f"bench: {trigger}, {count:,} rules failed: {exc}",
                              file=sys.stderr, flush=True)
                        continue
                    rows.setdefault((trigger, count), []).extend(runs)
                    one = runs[0]
                    print(f"bench: ready {one.get('run_to_ready_s')} s, steady p99 "
                          f"{one.get('steady_p99')} ms, swap longest wait "
                          f"{one.get('swap_window_max')} ms, swap done in "
                          f"{one.get('swap_seconds')} s (compile {one.get('compile_s')} s), "
                          f"lost {one.get('alerts_lost')}", file=sys.stderr, flush=True)
        if args.throughput == "steady":
            for trigger in args.triggers:
                steady = {c: _median([r.get("steady_p99") for r in rows.get((trigger, c), [])])
                          for c in counts}
                throughputs[trigger] = steady_throughput(trigger, counts, args, cp, workdir,
                                                         steady)
        elif args.throughput != "off":
            for trigger in args.triggers:
                throughputs[trigger] = throughput(trigger, counts, args, cp, workdir)
    command = "python -m bench.rules_scale " + " ".join(argv or [])
    doc = {"benchmark": "rules_scale", "command": command.strip(),
           "note": (f"medians of {args.runs} fresh runs per cell; steady p99 = median of the "
                    f"per-second p99s from second 15, at {args.rate:,} events/s; the rules "
                    f"are swapped live at second {args.reload_at:g}; ratios to the 1-rule "
                    "cell of the same trigger"),
           "checks_s": {str(k): v for k, v in checks.items()},
           "throughput": throughputs,
           "summary": summarize(rows, checks, throughputs),
           "runs": {f"{t}-{c}": r for (t, c), r in rows.items()}}
    write_result(args.out, doc, started, load0)
    args.out.with_suffix(".md").write_text(markdown(doc))
    print(markdown(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
