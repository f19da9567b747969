"""Benchmark: the embedded broker's produce->consume hop and its top rates, Java client.

The Java kafka-clients (the Spark connector's client) produce and consume in one JVM, so
one clock times each record's hop. Latency at 1,000 and 10,000 records/s with the
consumer's fetch.max.wait.ms = 100 (long-poll wake-up must make it irrelevant), then the
highest produce and consume rates. Medians over ``--repeats`` runs; other work on the
same cores makes single runs noisy: each run first waits (bounded) for the CPUs to quiet
down and records how busy they were. Writes ``reports/bench/broker_latency.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

from bench import _machine as machine
from bench._java import compile_driver

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "reports" / "bench" / "broker_latency.json"


def run_driver(cp: str, *args: str, timeout: float, broker_pid: int,
               quiet_wait_s: float = 0.0) -> dict:
    """One run of the Java driver (``latency`` or ``throughput`` mode), its JSON result
    with how busy the CPUs were and the broker's CPU share."""
    busy_before = machine.wait_for_quiet(quiet_wait_s) if quiet_wait_s > 0 else None
    start, t0 = machine.cpu_times(), time.monotonic()
    broker_cpu0 = machine.process_cpu_s(broker_pid)
    proc = subprocess.run(["java", "-Xms256m", "-cp", cp, "BrokerLatencyBench", *args],
                          capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"bench program failed: {proc.stderr[-2000:]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    # busy share includes the bench itself (broker + JVM); "before" is everybody else
    out.update(cpu_busy_before=busy_before, cpu_busy_during=machine.busy_since(start),
               broker_cpu_cores=round((machine.process_cpu_s(broker_pid) - broker_cpu0)
                                      / (time.monotonic() - t0), 3))
    return out


def _median(runs: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bench.broker_latency", description=__doc__)
    ap.add_argument("--rates", default="1000,10000")
    ap.add_argument("--seconds", type=float, default=10.0, help="measured seconds per run")
    ap.add_argument("--warmup", type=float, default=2.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--fetch-max-wait-ms", type=int, default=100)
    ap.add_argument("--control-wait-ms", type=int, default=500,
                    help="also run the first rate with this fetch.max.wait.ms: a long-poll "
                         "woken by produce makes the two equal (0 to skip)")
    ap.add_argument("--throughput-seconds", type=float, default=5.0)
    ap.add_argument("--value-bytes", type=int, default=100)
    ap.add_argument("--quiet-wait", type=float, default=30.0,
                    help="before each run, wait up to this many seconds for the CPUs to be "
                         "< 30%% busy (other suites share them); 0 = don't wait")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    try:
        rates = [int(r) for r in args.rates.split(",") if r]
    except ValueError:
        print(f"bench.broker_latency: --rates: not a list of integers: {args.rates}",
              file=sys.stderr)
        return 2

    from appliance.broker import EmbeddedBroker

    cp = compile_driver("BrokerLatencyBench.java")
    result: dict = {"client": "java kafka-clients 3.9.1 (acks=all, idempotent, linger.ms=0)",
                    "fetch_max_wait_ms": args.fetch_max_wait_ms, "repeats": args.repeats,
                    "seconds_per_run": args.seconds, "cpu_count": os.cpu_count(),
                    "load_avg_at_start": os.getloadavg()[0], "latency": [], "throughput": {}}
    started = time.monotonic()
    with EmbeddedBroker() as broker:
        def latency(rate: int, wait_ms: int) -> dict:
            runs = []
            for _ in range(args.repeats):
                topic = f"lat-{rate}-{uuid.uuid4().hex[:6]}"
                broker.create_topics({topic: 1})
                runs.append(run_driver(cp, "latency", broker.bootstrap, topic, str(rate),
                                      str(args.seconds), str(args.warmup), str(wait_ms),
                                      timeout=args.seconds + args.warmup + 120,
                                      broker_pid=broker.proc.pid,
                                      quiet_wait_s=args.quiet_wait))
            out = {"rate": rate, "fetch_max_wait_ms": wait_ms,
                   "median_ms": {k: _median(runs, f"{k}_ms") for k in ("p50", "p99", "p999",
                                                                        "max")},
                   "median_broker_cpu_cores": _median(runs, "broker_cpu_cores"),
                   "runs": runs}
            print(f"rate {rate}/s wait {wait_ms} ms: {out['median_ms']}", file=sys.stderr)
            return out

        for rate in rates:
            result["latency"].append(latency(rate, args.fetch_max_wait_ms))
        if args.control_wait_ms and rates:
            result["control_other_fetch_wait"] = latency(rates[0], args.control_wait_ms)
        runs = []
        for _ in range(args.repeats):
            topic = f"tput-{uuid.uuid4().hex[:6]}"
            broker.create_topics({topic: 1})
            runs.append(run_driver(cp, "throughput", broker.bootstrap, topic,
                                  str(args.throughput_seconds), str(args.value_bytes),
                                  timeout=args.throughput_seconds + 200,
                                  broker_pid=broker.proc.pid,
                                  quiet_wait_s=args.quiet_wait))
        result["throughput"] = {
            "value_bytes": args.value_bytes,
            "median_produce_rps": _median(runs, "produce_rps"),
            "median_consume_rps": _median(runs, "consume_rps"),
            "runs": runs}
        print(f"throughput: {result['throughput']['median_produce_rps']:.0f} produce/s, "
              f"{result['throughput']['median_consume_rps']:.0f} consume/s", file=sys.stderr)
    machine.write_result(args.out, result, started)
    return 0


if __name__ == "__main__":
    sys.exit(main())
