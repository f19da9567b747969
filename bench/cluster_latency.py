"""The appliance as a cluster driver vs ``local[2]``, and how fast it recovers an executor.

(1) Latency: end-to-end latency (event produced -> alert consumed; p50/p99/p99.9) at
``--rate`` events/s, each run a fresh ``appliance run`` process (fresh topics and
checkpoint) counted from the moment it logs ``appliance.ready`` (warm-up included, as a
user gets it), once with ``master = local[2]`` and once against a 2-worker standalone
cluster (``bench._local_cluster``) in the same run; medians of ``--runs`` runs, each
with the instrument's own floor measured just before it, and the cluster/local ratios.
(2) Executor loss: per recovery cell (each trigger, and ``continuous-exit``: continuous
with ``[query] executor_loss_restarts = 0``, the exit-1 path that restarts in place
replaced), a steady load, one executor JVM killed with SIGKILL, the appliance restarted
when it exits 1 (as systemd's ``Restart=on-failure`` would): the restarts in place,
lost alerts, duplicates, seconds from the kill to the first alert of an event sent
after it, and the longest any such event waited for its alert (with one executor of two
lost, the other's partitions alert at once: the first figure is then ~0 s and the second
is the recovery). Writes ``reports/bench/cluster_latency.json``. The machine is shared:
noisy.

    .venv/bin/python -m bench cluster_latency
    .venv/bin/python -m bench.cluster_latency --rate 500 --seconds 5 --runs 1 \\
        --recovery-cells continuous --recovery-seconds 15
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
from dataclasses import dataclass, field
from pathlib import Path

from appliance.broker import EmbeddedBroker
from appliance.config import Config, write_config
from appliance.process import process_group
from appliance.process.logwatch import log_events, wait_for_event
from appliance.rules.rules_file import EXAMPLE_RULES
from appliance.trigger import TRIGGERS
from bench._cells import short_run_interval
from bench._local_cluster import LocalCluster
from bench._machine import wait_for_quiet, write_result
from loadgen.arrivals import ArrivalClock
from loadgen.config import LoadConfig
from loadgen.run import run_load

OUT = Path("reports/bench/cluster_latency.json")

PERCENTILES = ("p50", "p99", "p999")


@dataclass(frozen=True)
class RecoveryCell:
    """One executor-loss measurement: a trigger and the ``[query]`` keys it runs with."""

    name: str
    trigger: str
    query: dict = field(default_factory=dict)


RECOVERY_CELLS = {cell.name: cell for cell in (
    # The query restarted in the appliance's own session (appliance.process.restarts).
    RecoveryCell("continuous", "continuous"),
    # The same loss handled by exiting 1 and a fresh process, as before in-place restarts.
    RecoveryCell("continuous-exit", "continuous", {"executor_loss_restarts": 0}),
    RecoveryCell("realtime", "realtime"),  # Spark retries the tasks itself
    RecoveryCell("microbatch", "microbatch"),
)}


class ApplianceRun:
    """``appliance run`` in a process (group) of its own, structlog lines to a file."""

    def __init__(self, config: Path, log: Path):
        self.log = log
        with log.open("ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "appliance", "run", "--config", str(config)],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True)

    def wait_for(self, event: str, timeout: float) -> dict:
        return wait_for_event(self.log, event, self.proc, timeout)

    def stop(self, timeout: float = 60.0) -> None:
        process_group.stop(self.proc, grace=timeout)


def _config(directory: Path, bootstrap: str, topics: dict[str, str], trigger: str,
            master: str, spark: dict[str, str], query: dict | None = None) -> Path:
    return write_config(Config.model_validate({
        "kafka": {"bootstrap_servers": bootstrap},
        "topics": topics,
        "query": {"trigger": trigger, "interval": short_run_interval(trigger),
                  "checkpoint_dir": "checkpoint", **(query or {})},
        "rules": {"path": str(EXAMPLE_RULES)},
        "spark": {"master": master, "driver_host": "127.0.0.1",
                  "driver_bind_address": "127.0.0.1", **spark},
        "metrics": {"port": 0},
    }), directory / "appliance.toml")


def _fresh(broker, directory: Path, trigger: str, master: str,
           query: dict | None = None) -> tuple[Path, dict]:
    run = f"bench-{uuid.uuid4().hex[:6]}"
    topics = {"events": f"{run}-events", "alerts": f"{run}-alerts", "dead_letters": f"{run}-dlq"}
    broker.create_topics({topics["events"]: 2, topics["alerts"]: 1, topics["dead_letters"]: 1})
    cell = directory / run
    cell.mkdir()
    spark = {"spark.cores.max": "2", "spark.executor.memory": "1g"} \
        if master.startswith("spark://") else {}
    return _config(cell, broker.bootstrap, topics, trigger, master, spark, query), topics


def _load(bootstrap: str, topics: dict, rate: float, seconds: float, workers: int,
          floor_seconds: float, grace: float):
    return LoadConfig(bootstrap=bootstrap, rate=rate, duration=seconds, workers=workers,
                      events_topic=topics["events"], alerts_topic=topics["alerts"],
                      dlq_topic=topics["dead_letters"], floor_seconds=floor_seconds,
                      grace=grace, progress=False)


def latency_run(broker, directory: Path, master: str, trigger: str, args) -> dict:
    config, topics = _fresh(broker, directory, trigger, master)
    busy = wait_for_quiet(args.quiet_wait)
    appliance = ApplianceRun(config, config.parent / "appliance.log")
    try:
        appliance.wait_for("appliance.ready", 600)
        report = run_load(_load(broker.bootstrap, topics, args.rate, args.seconds,
                                args.workers, args.floor_seconds, 120.0))
    finally:
        appliance.stop()
    lat = report.latency_ms or {}
    return {"master": master, "trigger": trigger, "latency_ms": {k: lat.get(k) for k in
                                                                 (*PERCENTILES, "max")},
            "floor_ms": report.floor_ms, "achieved_rate": report.achieved_rate,
            "lost": report.lost, "fell_behind": report.behind_schedule.get("fell_behind"),
            "per_second": report.latency_series, "cpu_busy_before": busy}


def recovery_run(broker, cluster, directory: Path, cell: RecoveryCell, args) -> dict:
    config, topics = _fresh(broker, directory, cell.trigger, cluster.master_url, cell.query)
    runs = [ApplianceRun(config, config.parent / "appliance-0.log")]
    outcome: dict = {}
    try:
        runs[0].wait_for("query.processing", 900)
        app_id = runs[0].wait_for("spark.ready", 5)["app_id"]
        load = _load(broker.bootstrap, topics, args.recovery_rate, args.recovery_seconds, 1,
                     0.0, 900.0)
        with ArrivalClock(broker.bootstrap, topics["alerts"]) as clock:
            thread = threading.Thread(target=lambda: outcome.update(report=run_load(load)),
                                      daemon=True)
            thread.start()
            time.sleep(min(args.kill_after, args.recovery_seconds / 2))
            victim = cluster.executors(app_id)[0]
            killed_at = time.time()
            os.kill(victim.pid, signal.SIGKILL)
            exits = []
            deadline = time.monotonic() + args.recovery_seconds + 600
            while thread.is_alive() and time.monotonic() < deadline:
                code = runs[-1].proc.poll()
                if code is not None:  # Restart=on-failure
                    exits.append({"code": code, "after_s": round(time.time() - killed_at, 1)})
                    if code != 1 or len(exits) > 3:
                        break
                    runs.append(ApplianceRun(config, config.parent / f"appliance-{len(runs)}.log"))
                time.sleep(0.5)
            thread.join(timeout=30)
            first, worst = clock.first_after(killed_at), clock.worst_after(killed_at)
    finally:
        for run in runs:
            run.stop()
    report = outcome.get("report")
    in_place = [event for run in runs for event in log_events(run.log)
                if event.get("event") == "query.recovered"]
    return {"cell": cell.name, "trigger": cell.trigger, "rate": args.recovery_rate,
            "exits": exits, "restarted": bool(exits),
            "in_place_restarts": len(in_place),
            "in_place_recovered_s": [event.get("seconds") for event in in_place],
            "lost": report.lost if report else None,
            "expected_alerts": report.expected_alerts if report else None,
            "duplicates": report.duplicates if report else None,
            "first_alert_after_kill_s": round(first, 2) if first is not None else None,
            "worst_wait_after_kill_s": round(worst, 2) if worst is not None else None}


def _summary(runs: list[dict]) -> dict:
    out = {}
    for key in PERCENTILES:
        values = [r["latency_ms"][key] for r in runs if r["latency_ms"].get(key) is not None]
        out[key] = statistics.median(values) if values else None
    floors = [r["floor_ms"]["p99"] for r in runs if r.get("floor_ms")]
    out["floor_p99"] = statistics.median(floors) if floors else None
    out["lost"] = sum(r["lost"] for r in runs)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.cluster_latency")
    parser.add_argument("--rate", type=float, default=10_000.0)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2, help="loadgen producer processes")
    parser.add_argument("--floor-seconds", type=float, default=3.0)
    parser.add_argument("--triggers", nargs="+", choices=TRIGGERS, default=["continuous"])
    parser.add_argument("--recovery-cells", nargs="*", choices=list(RECOVERY_CELLS),
                        default=list(RECOVERY_CELLS))
    parser.add_argument("--recovery-rate", type=float, default=2000.0)
    parser.add_argument("--recovery-seconds", type=float, default=40.0)
    parser.add_argument("--kill-after", type=float, default=10.0)
    parser.add_argument("--quiet-wait", type=float, default=30.0,
                        help="seconds to wait (at most) for idle CPUs before each run")
    parser.add_argument("--out", default=str(OUT))
    args = parser.parse_args([] if argv is None else argv)
    started, load0 = time.monotonic(), os.getloadavg()[0]

    results: dict = {"latency": [], "recovery": []}
    with tempfile.TemporaryDirectory(prefix="bench-cluster-") as tmp, \
            EmbeddedBroker() as broker, \
            LocalCluster(workers=2, cores_per_worker=2, worker_memory="2g",
                         base_dir=Path(tmp) / "cluster") as cluster:
        for trigger in args.triggers:
            for i in range(args.runs):
                for master in ("local[2]", cluster.master_url):
                    label = "cluster" if master.startswith("spark://") else master
                    print(f"bench: cluster_latency {trigger} {label} run {i + 1}/{args.runs}"
                          f" @ {args.rate:g}/s", file=sys.stderr, flush=True)
                    row = latency_run(broker, Path(tmp), master, trigger, args)
                    results["latency"].append({**row, "master": label})
        for name in args.recovery_cells:
            print(f"bench: cluster_latency executor loss, {name}", file=sys.stderr,
                  flush=True)
            results["recovery"].append(
                recovery_run(broker, cluster, Path(tmp), RECOVERY_CELLS[name], args))
    cells = []
    for trigger in args.triggers:
        local = _summary([r for r in results["latency"]
                          if r["trigger"] == trigger and r["master"] == "local[2]"])
        remote = _summary([r for r in results["latency"]
                           if r["trigger"] == trigger and r["master"] == "cluster"])
        ratio = {k: (round(remote[k] / local[k], 2) if remote[k] and local[k] else None)
                 for k in PERCENTILES}
        cells.append({"trigger": trigger, "local[2]": local, "cluster": remote,
                      "cluster_over_local": ratio})
    doc = {"benchmark": "cluster_latency", "command": "python -m bench.cluster_latency "
           + " ".join(argv or []), "rate": args.rate, "seconds": args.seconds,
           "runs": args.runs,
           "note": "fresh appliance run per run, measured from appliance.ready; medians of "
                   "--runs runs; shared machine: noisy",
           "cells": cells, **results}
    write_result(Path(args.out), doc, started, load0)
    for cell in cells:
        for label in ("local[2]", "cluster"):
            s = cell[label]
            print(f"{cell['trigger']:>10} {label:>8}  p50 {s['p50']} ms  p99 {s['p99']} ms  "
                  f"p99.9 {s['p999']} ms  (floor p99 {s['floor_p99']} ms, lost {s['lost']})")
        print(f"{'':>10} {'ratio':>8}  {cell['cluster_over_local']}")
    for r in results["recovery"]:
        print(f"executor loss {r['cell']:>15}: in place {r['in_place_restarts']}, "
              f"restarted {r['restarted']}, lost {r['lost']}"
              f"/{r['expected_alerts']}, duplicates {r['duplicates']}, first alert "
              f"{r['first_alert_after_kill_s']} s after the kill, the longest an event "
              f"sent after it waited {r['worst_wait_after_kill_s']} s")
    lost = sum(s["lost"] or 0 for c in cells for s in (c["local[2]"], c["cluster"]))
    lost += sum(r["lost"] or 0 for r in results["recovery"])
    complete = all(r["lost"] is not None for r in results["recovery"])
    return 0 if lost == 0 and complete else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
