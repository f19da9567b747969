"""End-to-end latency (event produced -> alert consumed) and alert throughput per trigger.

One embedded broker and one SparkSession for the whole run; per (trigger, rate) a fresh
query on fresh topics and a fresh checkpoint, driven by loadgen (the same accounting as
``appliance demo`` and ``loadgen run``). Writes ``reports/bench/appliance_latency.json``.
The machine is shared with other work: numbers are medians of one run each, noisy.

    .venv/bin/python -m bench appliance_latency
    .venv/bin/python -m bench.appliance_latency --triggers continuous --rates 500 --seconds 10
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
import uuid
from pathlib import Path

OUT = Path("reports/bench/appliance_latency.json")


def _config(trigger: str, bootstrap: str, checkpoint: str):
    """The demo's config (example rules, same intervals) on topics of its own."""
    from appliance.config import TopicsConfig
    from loadgen.demo import demo_config

    run = uuid.uuid4().hex[:6]
    topics = TopicsConfig(events=f"bench-{run}-events", alerts=f"bench-{run}-alerts",
                          dead_letters=f"bench-{run}-dlq")
    return demo_config(trigger, checkpoint, bootstrap).model_copy(update={"topics": topics})


def measure_one(spark, broker, trigger: str, rate: float, seconds: float) -> dict:
    from appliance.runner import Appliance
    from appliance.topics import default_partitions
    from loadgen.demo import measure

    with tempfile.TemporaryDirectory(prefix="bench-appliance-") as tmp:
        config = _config(trigger, broker.bootstrap, str(Path(tmp) / "cp"))
        broker.create_topics(default_partitions(config.topics))
        appliance = Appliance(config, spark=spark)
        started = time.monotonic()
        try:
            appliance.start()
            startup_s = time.monotonic() - started
            report = measure(appliance, seconds, rate, None, floor_seconds=0)
        finally:
            appliance.stop()
    lat = report.latency_ms or {}
    return {
        "trigger": trigger, "interval": config.query.interval, "target_rate": rate,
        "achieved_rate": report.achieved_rate, "sent": report.sent,
        "alerts_expected": report.expected_alerts, "alerts_received": report.received_alerts,
        "alerts_lost": report.lost, "alert_throughput_per_s":
            round(report.received_alerts / max(report.duration_s, 1e-9), 1),
        "latency_ms": {k: lat.get(k)
                       for k in ("count", "min", "p50", "p90", "p99", "p999", "max")},
        "query_startup_s": round(startup_s, 1), "fell_behind":
            report.behind_schedule.get("fell_behind"),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.appliance_latency")
    parser.add_argument("--triggers", nargs="+",
                        default=["continuous", "realtime", "microbatch"])
    parser.add_argument("--rates", nargs="+", type=float, default=[1000.0, 5000.0, 10000.0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--out", default=str(OUT))
    args = parser.parse_args([] if argv is None else argv)

    from appliance.broker import EmbeddedBroker
    from appliance.config import Config
    from appliance.session import build_session

    command = "python -m bench.appliance_latency " + " ".join(
        ["--triggers", *args.triggers, "--rates", *[f"{r:g}" for r in args.rates],
         "--seconds", f"{args.seconds:g}"])
    results = []
    with EmbeddedBroker() as broker:
        spark = build_session(Config.model_validate({"spark": {"master": "local[2]"}}),
                              app_name="bench-appliance")
        try:
            for trigger in args.triggers:
                for rate in args.rates:
                    print(f"bench: appliance {trigger} @ {rate:g}/s", file=sys.stderr,
                          flush=True)
                    results.append(measure_one(spark, broker, trigger, rate, args.seconds))
        finally:
            spark.stop()
    doc = {"benchmark": "appliance_latency", "command": command,
           "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
           "note": "one run per cell on a shared 2-core machine: medians, noisy",
           "results": results}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=2) + "\n")
    for r in results:
        lat = r["latency_ms"]
        print(f"{r['trigger']:>10} {r['target_rate']:>7g}/s  p50 {lat['p50']} ms  "
              f"p99 {lat['p99']} ms  p99.9 {lat['p999']} ms  "
              f"alerts {r['alerts_received']}/{r['alerts_expected']}")
    return 0 if all(r["alerts_lost"] == 0 for r in results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
