"""Benchmark: admission control under overload, the adaptive read limit
(``maxOffsetsPerTrigger=auto``) against fixed limits.

Each mode runs the same scenario (loadgen.overload.run_scenario) on its own topics and
checkpoint in one local[2] Spark session and one embedded broker: calibrate the relay's
sustainable rate on a backlog, then half of it, twice it for ``--overload-seconds``, half
again until the lag is back near zero. The relay applies a costly always-true predicate
(loadgen.overload.COSTLY_PREDICATE), so the rates stay within one Python producer's reach.

Per mode: the sustainable rate measured, the largest lag, the drain time, the driver's and
broker's RSS peaks, median latency before and after the overload, and the batch durations
(median and max, from the query's progress): the adaptive limit should keep batches near
its target while a fixed limit either lets a batch grow with the backlog (a large limit) or
cannot drain it (a small one). Writes ``reports/bench/connector_admission.json`` and one
PNG per mode next to it. Other work on the same cores makes single runs noisy: compare
modes within one run only.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from pyspark.sql import SparkSession

from appliance.broker import EmbeddedBroker
from appliance.connector import spark_jars_conf
from bench._machine import write_result
from loadgen.overload import (
    CALIBRATION_BACKLOG,
    OverloadRun,
    Scenario,
    run_scenario,
    start_costly_relay,
    write_png,
)

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "reports" / "bench" / "connector_admission.json"
PARTITIONS = 2


def modes(target: str, fixed: list[int]) -> dict[str, dict[str, str]]:
    out = {"auto": {"maxOffsetsPerTrigger": "auto", "adaptiveTargetBatchDuration": target}}
    for limit in fixed:
        out[f"fixed-{limit}"] = {"maxOffsetsPerTrigger": str(limit)}
    return out


def run_mode(spark, broker, name: str, options: dict[str, str], scenario: Scenario,
             driver_pid: int, workdir: str) -> dict:
    src, out = f"adm-{name}-{uuid.uuid4().hex[:6]}", f"adm-{name}-out-{uuid.uuid4().hex[:6]}"
    broker.create_topics({src: PARTITIONS, out: PARTITIONS})
    run = OverloadRun(broker.bootstrap, src, out, PARTITIONS,
                      watch={"driver": driver_pid, "broker": broker.proc.pid})
    started = []

    def start():
        started.append(start_costly_relay(spark, broker.bootstrap, src, out,
                                          f"{workdir}/{name}", options))

    try:
        report, drained = run_scenario(run, scenario, start, lambda: started[0].recentProgress,
                                       lambda: started[0].exception())
        progress = started[0].recentProgress
    finally:
        for q in started:
            q.stop()
    durations = [p["durationMs"]["triggerExecution"] for p in progress if p["numInputRows"] > 0]
    figures = report.summary()
    figures.update({"options": options, "drained": drained is not None,
                    "batch_ms_median": statistics.median(durations) if durations else None,
                    "batch_ms_max": max(durations, default=None),
                    "batch_rows_max": max((p["numInputRows"] for p in progress), default=0)})
    write_png(report, OUT.with_name(f"connector_admission_{name}.png"),
              f"{name}: {scenario.overload_s:g} s at 2 x {figures['sustainable_rate']}/s")
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.connector_admission", description=__doc__)
    parser.add_argument("--overload-seconds", type=float, default=30.0)
    parser.add_argument("--backlog", type=int, default=CALIBRATION_BACKLOG,
                        help="records of the calibration backlog")
    parser.add_argument("--target", default="2s", help="adaptiveTargetBatchDuration")
    parser.add_argument("--fixed", default="1000,200000",
                        help="fixed maxOffsetsPerTrigger values to compare (200000: the "
                             "appliance's micro-batch tuning)")
    args = parser.parse_args(argv)
    started, load0 = time.monotonic(), os.getloadavg()[0]
    scenario = Scenario(overload_s=args.overload_seconds, backlog_records=args.backlog)
    fixed = [int(x) for x in args.fixed.split(",") if x.strip()]

    builder = (SparkSession.builder.master("local[2]").appName("bench-connector-admission")
               .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
               .config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.driver.host", "127.0.0.1"))
    for key, value in spark_jars_conf().items():
        builder = builder.config(key, value)
    results = {}
    with EmbeddedBroker(start_timeout=120) as broker, tempfile.TemporaryDirectory() as workdir:
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
        driver_pid = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
        try:
            for name, options in modes(args.target, fixed).items():
                results[name] = run_mode(spark, broker, name, options, scenario, driver_pid,
                                         workdir)
                print(f"{name}: {json.dumps(results[name])}", flush=True)
        finally:
            spark.stop()
    write_result(OUT, {"benchmark": "connector_admission", "scenario": vars(scenario),
                       "modes": results}, started, load0)
    return 0 if all(r["lost"] == 0 for r in results.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
