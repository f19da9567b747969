"""What the in-band alert latency metric costs, and how it compares with loadgen's numbers.

Cost: ``appliance run`` (its own process tree: Python driver + Spark JVM) at a fixed event
rate, once with ``[metrics] alert_latency = false`` and once with ``true``, alternating
for several rounds; the CPU seconds the tree used during the steady part of the load are
divided by the wall time. The cost is the relative difference of the medians. The broker
and the load generator run in their own processes and are not counted.

Direct: with the metric on, the observer thread's own CPU time
(``appliance_alert_latency_observer_cpu_seconds_total``, scraped at both ends of the same
window) as a share of the tree's. When the run saturates the machine the A/B difference
says little (both runs get what the two cores have left); the direct share still holds.
The header the query adds to each alert is not in it (the A/B difference covers that).

Agreement: in each trigger (metric on), the in-band p99 (bucket interpolation, like
Prometheus' histogram_quantile) next to loadgen's end-to-end p99 and its floor.

    .venv/bin/python -m bench alert_latency_cost
    .venv/bin/python -m bench.alert_latency_cost --rate 500 --seconds 5 --rounds 1 \\
        --triggers continuous          # tiny: proves it works, numbers are noise
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from appliance.broker import EmbeddedBroker
from appliance.observability.alert_latency import bucket_counts, observer_cpu_s, quantile_ms
from appliance.process import process_group
from appliance.process.cpu_affinity import tree
from appliance.trigger import TRIGGERS
from bench._cells import short_run_interval
from bench._machine import process_cpu_s, wait_for_quiet, write_result

OUT = Path("reports/bench/alert_latency_cost.json")
ROOT = Path(__file__).resolve().parents[1]
RULES = ROOT / "examples" / "rules.yml"
START_TIMEOUT_S = 600.0


def tree_cpu_s(pid: int) -> float:
    total = 0.0
    for p in tree(pid):  # the appliance's Spark JVM among them
        try:
            total += process_cpu_s(p)
        except (OSError, ValueError, IndexError):
            pass
    return total


def run_one(trigger: str, alert_latency: bool, rate: float, seconds: float,
            tmp: Path) -> dict:
    with EmbeddedBroker(topics={"events": 2, "alerts": 1, "events.dlq": 1},
                        log_path=tmp / "broker.log", start_timeout=300) as broker:
        config = tmp / "appliance.toml"
        config.write_text(
            f'[kafka]\nbootstrap_servers = "{broker.bootstrap}"\n'
            f'[query]\ntrigger = "{trigger}"\ninterval = "{short_run_interval(trigger)}"\n'
            f'checkpoint_dir = "{tmp / "checkpoint"}"\n[rules]\npath = "{RULES}"\n'
            f'[spark]\nmaster = "local[2]"\n'
            f'[metrics]\nport = 0\nalert_latency = {str(alert_latency).lower()}\n')
        log = tmp / "appliance.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen([sys.executable, "-m", "appliance", "run", "--config",
                                     str(config)], stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            port = _wait_log(log, r'"event": "query.processing"', proc) and \
                int(_wait_log(log, r'"metrics_port": (\d+)', proc))
            report = tmp / "loadgen.json"
            # A saturated run delivers its last alerts about one p50 (seconds) after the
            # last send; loadgen's default 10 s grace would count those late alerts as
            # lost. The grace ends as soon as every expected alert arrived, so a long one
            # costs nothing on a run that keeps up.
            load = subprocess.Popen([sys.executable, "-m", "loadgen", "run",
                                     "--bootstrap-server", broker.bootstrap,
                                     "--rate", f"{rate:g}", "--duration", f"{seconds:g}",
                                     "--grace", f"{_grace_s(seconds):g}",
                                     "--quiet", "--report", str(report)],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            # Steady part only: skip loadgen's floor phase and the first fifth of the load.
            time.sleep(2.0 + seconds * 0.2)
            observer0 = _observer_cpu_s(port) if alert_latency else None
            cpu0, wall0 = tree_cpu_s(proc.pid), time.monotonic()
            time.sleep(seconds * 0.7)
            cpu1, wall1 = tree_cpu_s(proc.pid), time.monotonic()
            observer1 = _observer_cpu_s(port) if alert_latency else None
            load.wait(timeout=seconds + 300)
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
                text = r.read().decode()
            doc = json.loads(report.read_text())
        finally:
            process_group.stop(proc, grace=60, whole_group=True)
    lat = doc.get("latency_ms") or {}
    return {"trigger": trigger, "alert_latency": alert_latency, "rate": rate,
            "cpu_percent": round(100.0 * (cpu1 - cpu0) / (wall1 - wall0), 1),
            "observer_share_percent": None if observer0 is None else
            round(100.0 * (observer1 - observer0) / max(cpu1 - cpu0, 1e-9), 2),
            "loadgen_p50_ms": lat.get("p50"), "loadgen_p99_ms": lat.get("p99"),
            "floor_p99_ms": (doc.get("floor_ms") or {}).get("p99"),
            "in_band_p50_ms": quantile_ms(bucket_counts(text), 0.5) if alert_latency else None,
            "in_band_p99_ms": quantile_ms(bucket_counts(text), 0.99) if alert_latency else None,
            "alerts_received": doc.get("received_alerts"), "lost": doc.get("lost")}


def _grace_s(seconds: float) -> float:
    """How long loadgen waits for late alerts: the load's own length, at least 10 s."""
    return max(10.0, seconds)


def _observer_cpu_s(port: int) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        cpu = observer_cpu_s(r.read().decode())
    if cpu is None:
        raise RuntimeError("the appliance exports no observer CPU counter")
    return cpu


def _wait_log(log: Path, pattern: str, proc: subprocess.Popen) -> str:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline and proc.poll() is None:
        found = re.search(pattern, log.read_text(errors="replace"))
        if found:
            return found.group(1) if found.groups() else found.group(0)
        time.sleep(0.5)
    raise RuntimeError(f"appliance did not log {pattern!r}; see {log}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.alert_latency_cost")
    parser.add_argument("--rate", type=float, default=10000.0)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--triggers", nargs="+",
                        choices=TRIGGERS, default=list(TRIGGERS),
                        help="the cost runs in the first; agreement in each")
    parser.add_argument("--out", default=str(OUT))
    args = parser.parse_args([] if argv is None else argv)
    started, load0 = time.monotonic(), os.getloadavg()[0]
    busy_before = wait_for_quiet(60.0)
    runs = []
    with tempfile.TemporaryDirectory(prefix="bench-alert-latency-") as tmp:
        cost_trigger = args.triggers[0]
        for round_no in range(args.rounds):
            for on in (False, True):
                print(f"bench: alert latency {'on' if on else 'off'} round {round_no + 1}",
                      file=sys.stderr, flush=True)
                d = Path(tmp) / f"cost-{round_no}-{on}"
                d.mkdir()
                runs.append(run_one(cost_trigger, on, args.rate, args.seconds, d))
        for trigger in args.triggers[1:]:
            d = Path(tmp) / f"agree-{trigger}"
            d.mkdir()
            runs.append(run_one(trigger, True, args.rate, args.seconds, d))
    off = [r["cpu_percent"] for r in runs if r["trigger"] == cost_trigger
           and not r["alert_latency"]]
    on = [r["cpu_percent"] for r in runs if r["trigger"] == cost_trigger
          and r["alert_latency"]]
    median_off, median_on = round(statistics.median(off), 2), round(statistics.median(on), 2)
    share = round(statistics.median(r["observer_share_percent"] for r in runs
                                    if r["trigger"] == cost_trigger and r["alert_latency"]), 2)
    cost = round(100.0 * (median_on - median_off) / max(median_off, 1e-9), 1)
    doc = {"benchmark": "alert_latency_cost",
           "command": "python -m bench.alert_latency_cost " + " ".join(argv or []),
           "machine": {"busy_before": busy_before},
           "note": "appliance process tree CPU (driver + JVM) over the steady part of the load",
           "cost": {"trigger": cost_trigger, "rate": args.rate,
                    "cpu_percent_off_median": median_off, "cpu_percent_on_median": median_on,
                    "relative_cost_percent": cost, "budget_percent": 5.0,
                    "observer_share_percent_median": share},
           "runs": runs}
    write_result(Path(args.out), doc, started, load0)
    print(f"alert latency metric at {args.rate:g} events/s ({cost_trigger}): appliance CPU "
          f"{median_off}% off, {median_on}% on -> {cost:+}% (budget 5%); the observer "
          f"thread itself: {share}% of the appliance's CPU")
    for r in runs:
        if r["alert_latency"]:
            print(f"  {r['trigger']:>10}: in-band p99 {r['in_band_p99_ms']} ms, loadgen p99 "
                  f"{r['loadgen_p99_ms']} ms (floor p99 {r['floor_p99_ms']} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
