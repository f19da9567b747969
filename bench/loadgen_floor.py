"""Benchmark: the load generator's own floor and the highest rate it keeps to schedule.

On the embedded broker: (1) the floor (produce and consume back, no appliance) at 1,000
and 10,000 events/s, medians over ``--repeats`` runs; (2) the highest rate one producer
worker (and two) sustains without falling behind its schedule, found by doubling then
bisecting. Before each run it waits (bounded) for the CPUs to be mostly idle and records
how busy they were. Nothing consumes the events in (2), so it measures the generator and the
broker's ingestion only. Other work on the same cores makes every number noisy: read the
medians, not single runs. Writes ``reports/bench/loadgen_floor.json``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

from appliance.command_tree import hidden_alias
from appliance.durations import duration_arg
from bench._machine import wait_for_quiet, write_result

OUT = Path("reports/bench/loadgen_floor.json")


def _floor(bootstrap: str, rate: float, seconds: float, repeats: int,
           quiet_wait_s: float) -> dict:
    from loadgen.config import LoadConfig
    from loadgen.run import run_floor

    runs = []
    for _ in range(repeats):
        load = wait_for_quiet(quiet_wait_s)
        report = run_floor(LoadConfig(bootstrap=bootstrap, rate=rate, duration=seconds,
                                      grace=5, progress=False))
        runs.append({"p50": report.latency_ms["p50"], "p99": report.latency_ms["p99"],
                     "p999": report.latency_ms["p999"], "max": report.latency_ms["max"],
                     "lost": report.lost, "fell_behind": report.behind_schedule["fell_behind"],
                     "cpu_busy_before": round(load, 2)})
    medians = {k: statistics.median(r[k] for r in runs) for k in ("p50", "p99", "p999", "max")}
    return {"rate": rate, "seconds": seconds, "median_ms": medians, "runs": runs}


def _keeps_up(bootstrap: str, rate: float, workers: int, seconds: float,
              quiet_wait_s: float) -> tuple[bool, dict]:
    from loadgen.config import LoadConfig
    from loadgen.run import run_load

    load = wait_for_quiet(quiet_wait_s)
    report = run_load(LoadConfig(bootstrap=bootstrap, rate=rate, duration=seconds,
                                 workers=workers, alert_ratio=0.0, grace=1.0, progress=False,
                                 events_topic="bench.events", alerts_topic="bench.alerts",
                                 dlq_topic="bench.dlq"))
    behind = report.behind_schedule
    return not behind["fell_behind"], {"rate": rate, "achieved_rate": report.achieved_rate,
                                       "max_lag_ms": behind["max_lag_ms"],
                                       "late_events": behind["late_events"],
                                       "unsent": behind["unsent"],
                                       "cpu_busy_before": round(load, 2)}


def _max_rate(bootstrap: str, workers: int, seconds: float, start: float, limit: float,
              quiet_wait_s: float) -> dict:
    trials, ok_rate, bad_rate, rate = [], None, None, start
    while rate <= limit:  # double until it falls behind
        ok, trial = _keeps_up(bootstrap, rate, workers, seconds, quiet_wait_s)
        trials.append({**trial, "kept_up": ok})
        if not ok:
            bad_rate = rate
            break
        ok_rate, rate = rate, rate * 2
    for _ in range(3 if ok_rate and bad_rate else 0):  # bisect
        mid = round((ok_rate + bad_rate) / 2, -2)
        ok, trial = _keeps_up(bootstrap, mid, workers, seconds, quiet_wait_s)
        trials.append({**trial, "kept_up": ok})
        ok_rate, bad_rate = (mid, bad_rate) if ok else (ok_rate, mid)
    return {"workers": workers, "max_sustained_rate": ok_rate, "first_failing_rate": bad_rate,
            "trial_seconds": seconds, "trials": trials}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench.loadgen_floor", description=__doc__.splitlines()[0])
    p.add_argument("--bootstrap-server", dest="bootstrap", default=None,
                   help="use this broker (default: embedded)")
    hidden_alias(p, "--bootstrap", dest="bootstrap")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--seconds", type=duration_arg(allow_zero=False), default=5.0,
                   help="seconds per run (5s, 1m...)")
    p.add_argument("--out", default=str(OUT))
    p.add_argument("--quiet-wait", type=float, default=20.0,
                   help="before each run, wait up to this long for the CPUs to be < 30%% busy")
    args = p.parse_args(argv if argv is not None else [])

    from appliance.broker.embedded import EmbeddedBroker

    broker = None if args.bootstrap else EmbeddedBroker().start()
    bootstrap = args.bootstrap or broker.bootstrap
    started = time.monotonic()
    try:
        load_before = os.getloadavg()[0]
        result = {
            "note": "2 shared cores; other suites may run concurrently: medians are noisy",
            "floor": [_floor(bootstrap, rate, args.seconds, args.repeats, args.quiet_wait)
                      for rate in (1_000, 10_000)],
            "max_rate": [_max_rate(bootstrap, workers, 3.0, 2_500, 640_000, args.quiet_wait)
                         for workers in (1, 2)],
        }
    finally:
        if broker is not None:
            broker.stop()
    write_result(Path(args.out), result, started, load_before)
    for f in result["floor"]:
        print(f"floor @ {f['rate']:,}/s: median {f['median_ms']}", file=sys.stderr)
    for m in result["max_rate"]:
        print(f"max sustained rate, {m['workers']} worker(s): {m['max_sustained_rate']}/s",
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
