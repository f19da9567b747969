"""End-to-end alert latency as users get it: a fresh ``appliance run`` per cell, from ``ready``.

Every cell starts its own ``appliance run`` process (fresh JVM, nothing warmed by an earlier
cell), waits for its ``appliance.ready`` log line, and at that instant releases a Java driver
(``bench/java/AlertLatencyBench.java``, warmed on a topic of its own before the appliance
starts: see ``Driver``) sending JSON events open-loop; latency runs from each event's
*scheduled* send time to its alert being consumed, so the product's start-up tail counts. The
floor, a JVM relaying events to alerts without Spark (``passthrough``), runs on the same
broker in the same bench run, and every cell's steady-state p99 is reported as a ratio to
it. Each cell is run ``--runs`` times (in rounds: all cells, then all cells again) and the
medians are reported; the per-second p99 series of every run goes to the JSON and a PNG.

    make bench                                               # everything, 3 runs of 60 s
    .venv/bin/python -m bench.appliance_latency --list
    .venv/bin/python -m bench.appliance_latency --cells passthrough continuous \\
        --seconds 10 --runs 1                                # a smoke run

The ``*-reload`` cells swap the rules live (``appliance rules reload``, a file with one
more rule) at a fixed second after ``ready``; they report the latency of the events
scheduled in the 10 s around the swap next to the same run's steady state, and the swap's
own gap as the appliance measured it (``rules.reloaded``).

Writes ``reports/bench/appliance_latency.{json,md}`` and ``appliance_latency-<cell>.png``.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import replace
from pathlib import Path

from appliance.config import Config, TopicsConfig
from appliance.config import write_config as write_config_file
from appliance.process import process_group
from appliance.process.logwatch import log_events, wait_for_event
from appliance.topics import default_partitions
from appliance.tuning import JVM_OPTIONS
from bench import _machine as machine
from bench import _rule_sets as rule_sets
from bench import _sched as sched
from bench._cells import BY_NAME, CELLS, Cell
from bench._java import compile_driver
from loadgen.steady import WARMUP_S, split_warmup

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "reports" / "bench" / "appliance_latency.json"
RULES = ROOT / "examples" / "rules.yml"
ALERT_EVERY = 10          # 10% of events alert (rule cpu-critical of examples/rules.yml)
WARMUP_SECONDS = WARMUP_S  # "steady state" = scheduled seconds from here on
READY_TIMEOUT_S = 300.0
DRAIN_S = 30.0
DRIVER_WARMUP_S = 5.0          # the driver's own warm-up, at the cell's rate, before the product
DRIVER_WARM_TIMEOUT_S = 120.0
PRODUCER_LINGER_MS = 1         # the driver's event producer's linger.ms (see Driver)

# The targets, checked on the medians (ms unless named).
TARGETS = {
    "continuous": {"p99": 10, "p999": 25, "worst_second_p99": 25, "steady_ratio": 1.5},
    "realtime": {"p99": 10, "p999": 25, "worst_second_p99": 25, "steady_ratio": 1.5},
    "microbatch": {"p50": 100, "p99": 250},
    "continuous-50k": {"steady_p99": 10},
    # a live rules swap: no event waits more than one second
    "continuous-reload": {"swap_window_max": 1000},
    "realtime-reload": {"swap_window_max": 1000},
}
READY_TO_FIRST_ALERT_TARGET_S = 10.0
# The reload cells: seconds on either side of the swap that count as "around the swap" (the
# signal to the swap's end, widened by this much), and
# the rule the new file adds (on a metric the driver never sends: its events keep alerting
# exactly as before).
SWAP_WINDOW_S = 5
SWAP_FINISH_WAIT_S = 120.0  # the most a swap may still take once the load has ended
RELOAD_RULE = ('  - id: bench-reload\n    severity: info\n'
               '    when: "metric = \'bench.reload\' AND value > 0"\n')


# -- the Java driver ------------------------------------------------------------------------
def java_command(cp: str, *args: str) -> list[str]:
    return ["java", "-Xms256m", "-XX:+UseG1GC", "-cp", cp, "AlertLatencyBench", *args]


class Driver:
    """The Java driver as a process, warmed before the product under test starts.

    The driver is a fresh JVM too, and its own JIT and class loading took most of both cores
    for its first seconds: that landed in the first seconds of every cell (the passthrough
    floor's included) as if the product were slow. So it first runs the same sends and reads
    at the same rate on a topic of its own, says ``WARM``, and waits; ``measure()`` starts
    the measurement the moment the product is ready. A firehose's producers are long-running
    services, warm when an appliance restarts; the product's warm-up still counts in full.

    Its event producer batches for ``linger_ms`` (``--producer-linger-ms``, default
    ``PRODUCER_LINGER_MS``), as a firehose's producers do (Kafka 4's default is 5 ms). With
    0, at 10,000 events/s nearly every event was its own produce request: the driver took
    0.6-1.2 cores and the broker 0.3-0.5 of this 2-core machine, the product what was left.
    The wait is inside the measured latency (the clock starts at the scheduled send time).
    """

    def __init__(self, cp: str, broker, topics: dict[str, str], rate: int, seconds: float,
                 partitions: int, workdir: Path, linger_ms: int = PRODUCER_LINGER_MS) -> None:
        warm_topic = f"{topics['events']}-driver-warmup"
        broker.create_topics({warm_topic: partitions})
        self.seconds = seconds
        self.warm_line = ""
        self._stderr = (workdir / "driver.stderr").open("w+")
        self.proc = subprocess.Popen(
            java_command(cp, "drive", broker.bootstrap, topics["events"], topics["alerts"],
                         str(rate), f"{seconds:g}", str(ALERT_EVERY), str(partitions),
                         f"{DRAIN_S:g}", warm_topic, f"{DRIVER_WARMUP_S:g}", str(linger_ms)),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, text=True,
            start_new_session=True)

    def __enter__(self) -> Driver:
        """Waits for WARM (kept as ``warm_line``); the process is killed on any exit."""
        try:
            self.warm_line = self._wait_warm()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _fail(self, what: str) -> RuntimeError:
        self._stderr.seek(0)
        return RuntimeError(f"driver {what} (rc={self.proc.poll()}): "
                            f"{self._stderr.read()[-2000:]}")

    def _wait_warm(self, timeout: float = DRIVER_WARM_TIMEOUT_S) -> str:
        """Blocks until the driver says WARM (its line, e.g. ``WARM 50000/50000``)."""
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        line = self.proc.stdout.readline().strip() if ready else ""
        if not line.startswith("WARM"):
            raise self._fail(f"did not warm up within {timeout:g} s: {line!r}")
        return line

    def measure(self) -> dict:
        """GO, then the driver's result, with ``cpu_busy``: the machine's load over exactly
        the measured window (sending and draining), not the product's start-up."""
        busy0 = machine.cpu_times()
        self.proc.stdin.write("GO\n")
        self.proc.stdin.flush()
        return {**self._result(), "cpu_busy": machine.busy_since(busy0)}

    def _result(self) -> dict:
        try:
            out, _ = self.proc.communicate(timeout=self.seconds + DRAIN_S + 120)
        except subprocess.TimeoutExpired:
            raise self._fail("did not finish") from None
        if self.proc.returncode != 0 or not out.strip():
            raise self._fail("failed")
        return json.loads(out.strip().splitlines()[-1])

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)
        self._stderr.close()


# -- one cell -------------------------------------------------------------------------------
def _topics(cell: Cell) -> dict[str, str]:
    tag = f"{cell.name}-{uuid.uuid4().hex[:6]}"
    return {"events": f"{tag}-events", "alerts": f"{tag}-alerts", "dead_letters": f"{tag}-dlq"}


def write_config(cell: Cell, bootstrap: str, topics: dict[str, str], workdir: Path,
                 checkpoint: Path, rules: Path = RULES) -> Path:
    """What a user writes: bootstrap, topics, trigger, rules; the cell's levers on top."""
    query = {"trigger": cell.trigger, "checkpoint_dir": str(checkpoint),
             "starting_offsets": "latest", **cell.query}
    spark = {"master": "local[2]", **cell.spark}
    if cell.jvm_options:
        spark["spark.driver.extraJavaOptions"] = " ".join((*JVM_OPTIONS, *cell.jvm_options))
    return write_config_file(Config.model_validate({
        "kafka": {"bootstrap_servers": bootstrap}, "topics": topics, "query": query,
        "rules": {"path": str(rules)}, "spark": spark, "metrics": {"port": 0, **cell.metrics},
        "cpus": cell.cpus,
    }), workdir / "appliance.toml")


def _stop(proc: subprocess.Popen) -> int | None:
    return process_group.stop(proc, grace=90)


def run_appliance_cell(cell: Cell, cp: str, broker, seconds: float, workdir: Path,
                       ready_timeout: float = READY_TIMEOUT_S,
                       linger_ms: int = PRODUCER_LINGER_MS) -> dict:
    topics = _topics(cell)
    partitions = default_partitions(TopicsConfig(**topics))
    broker.create_topics(partitions)
    with Driver(cp, broker, topics, cell.rate, seconds, partitions[topics["events"]],
                workdir, linger_ms) as driver:
        result = _run_appliance(cell, broker, topics, workdir, ready_timeout, driver)
    return {**result, "driver_warm": driver.warm_line}


def _run_appliance(cell: Cell, broker, topics: dict[str, str], workdir: Path,
                   ready_timeout: float, driver: Driver) -> dict:
    base = Path("/dev/shm") if cell.tmpfs_checkpoint and Path("/dev/shm").is_dir() else workdir
    checkpoint = Path(tempfile.mkdtemp(prefix="bench-cp-", dir=base))
    rules = workdir / "rules.yml"
    if cell.rules:
        rule_sets.rules_file(cell.rules, rules)
    else:
        shutil.copyfile(RULES, rules)
    config = write_config(cell, broker.bootstrap, topics, workdir, checkpoint, rules)
    log = workdir / f"{cell.name}.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("APPLIANCE_")}
    spawned = time.monotonic()
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "appliance", "run", "--config",
                                 str(config)], stdout=out, stderr=subprocess.STDOUT, env=env,
                                cwd=ROOT, start_new_session=True,
                                preexec_fn=cell.priority.preexec if cell.priority else None)
    keeper = sched.ThreadPolicyKeeper(proc.pid, cell.threads) if cell.threads else None
    others = [broker.proc.pid, driver.proc.pid]
    pinning = (sched.Pinning(cell.affinity, proc.pid, others)
               if cell.affinity is not None else None)
    if pinning is not None and not cell.affinity.from_ready:
        pinning.apply()  # before the JVM starts: it inherits the CPUs
    if cell.priority is not None and cell.priority.broker_nice:
        sched.renice(sched.tree(broker.proc.pid), cell.priority.broker_nice)
    try:
        ready = wait_for_event(log, "appliance.ready", proc, ready_timeout, poll=0.05)
        ready_s = time.monotonic() - spawned
        if pinning is not None and cell.affinity.from_ready:
            pinning.apply()
        swap = _Swap(cell.reload_at_s, rules, proc) if cell.reload_at_s is not None else None
        result = driver.measure()
        if swap is not None:
            result["reload"] = swap.finish(log)
    finally:
        if pinning is not None:  # the broker serves the next cells on every CPU
            pinning.release()
        if cell.priority is not None and cell.priority.broker_nice:
            sched.renice(sched.tree(broker.proc.pid), 0)
        applied = keeper.stop() if keeper is not None else None
        rc = _stop(proc)
        shutil.rmtree(checkpoint, ignore_errors=True)
    if applied is not None:
        result["threads_rescheduled"] = applied
    if pinning is not None:  # seconds from the appliance's start (`released` at the end too)
        result["cpus_split_s"] = {"applied": pinning.applied_s, "released": pinning.released_s}
    progress = [e["durationMs"] for e in log_events(log)
                if e.get("event") == "query.progress" and isinstance(e.get("durationMs"), dict)]
    first = result.get("first_alert_after_start_ms", -1)
    result.update(
        cell=cell.name, trigger=cell.trigger, exit_code=rc,
        run_to_ready_s=round(ready_s, 2),
        run_to_first_alert_s=round(ready_s + first / 1000, 2) if first >= 0 else None,
        appliance_startup_s=ready.get("startup_s"), warmup_s=ready.get("warmup_s"),
        duration_ms_median=_phase_medians(progress))
    return result


class _Swap:
    """At ``at_s`` after the measurement starts: the rules file gains a rule and the
    appliance gets SIGHUP (what ``appliance rules reload`` sends)."""

    def __init__(self, at_s: float, rules: Path, proc: subprocess.Popen) -> None:
        self.at_s, self.rules, self.proc = at_s, rules, proc
        self.signalled_s: float | None = None
        self._started = time.monotonic()
        self._timer = threading.Timer(at_s, self._signal)
        self._timer.start()

    def _signal(self) -> None:
        new = self.rules.with_suffix(".new")
        new.write_text(self.rules.read_text() + RELOAD_RULE)
        new.replace(self.rules)
        self.signalled_s = round(time.monotonic() - self._started, 3)
        os.kill(self.proc.pid, signal.SIGHUP)

    def finish(self, log: Path, wait_s: float = SWAP_FINISH_WAIT_S) -> dict:
        """The swap's outcome as the appliance logged it, waiting (at most ``wait_s``, the
        appliance still running) for a swap that is still compiling when the load ends."""
        self._timer.cancel()
        deadline = time.monotonic() + wait_s
        while True:  # bounded by the deadline
            events = log_events(log)
            done = [e for e in events if e.get("event") == "rules.reloaded"]
            rejected = [e for e in events if e.get("event") == "rules.rejected"]
            if done or rejected or self.signalled_s is None or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        return {"at_s": self.at_s, "signalled_s": self.signalled_s,
                "reloaded": done[-1] if done else None,
                "rejected": rejected[-1] if rejected else None}


def run_passthrough_cell(cell: Cell, cp: str, broker, seconds: float, workdir: Path,
                         linger_ms: int = PRODUCER_LINGER_MS) -> dict:
    topics = _topics(cell)
    broker.create_topics({topics["events"]: 2, topics["alerts"]: 1})
    with Driver(cp, broker, topics, cell.rate, seconds, 2, workdir, linger_ms) as driver:
        result = _run_passthrough(cell, cp, broker, topics, seconds, driver)
    return {**result, "driver_warm": driver.warm_line}


def _run_passthrough(cell: Cell, cp: str, broker, topics: dict[str, str], seconds: float,
                     driver: Driver) -> dict:
    relay = subprocess.Popen(java_command(cp, "relay", broker.bootstrap, topics["events"],
                                          topics["alerts"], f"{seconds + DRAIN_S + 900:g}"),
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                             start_new_session=True)
    try:
        # bounded by the relay's own deadline; it is killed as soon as the driver ends
        line = relay.stdout.readline().strip()
        if line != "READY":
            raise RuntimeError(f"relay did not start (rc={relay.poll()}): {line!r}")
        result = driver.measure()
    finally:
        relay.kill()
        relay.wait(timeout=30)
    result.update(cell=cell.name, trigger=cell.trigger)
    return result


def _phase_medians(progress: list[dict]) -> dict[str, float]:
    keys = sorted({k for p in progress for k in p})
    return {k: statistics.median(p.get(k, 0) for p in progress) for k in keys}


# -- summaries ------------------------------------------------------------------------------
def derive(result: dict) -> dict:
    """The figures a cell is judged by, from one run's raw driver output."""
    lat = result["latency_ms"]
    series = [s for s in result["per_second"] if s["count"] > 0]
    split = split_warmup(series, WARMUP_SECONDS)
    derived = {"p50": lat["p50"], "p99": lat["p99"], "p999": lat["p999"], "max": lat["max"],
               "worst_second_p99": max((s["p99"] for s in series), default=None),
               "steady_p99": split.steady_p99_ms,
               "warmup_worst_second_p99": split.warmup_worst_p99_ms,
               "alerts_lost": result["alerts_lost"], "duplicates": result["duplicates"],
               "run_to_first_alert_s": result.get("run_to_first_alert_s"),
               "run_to_ready_s": result.get("run_to_ready_s")}
    reload = result.get("reload")
    if reload and reload.get("reloaded"):
        # From the signal to the end of the swap (the old query runs until its boundary),
        # widened by SWAP_WINDOW_S on both sides.
        signal_s = reload["signalled_s"]
        done_s = signal_s + reload["reloaded"].get("seconds", 0.0)
        around = [s for s in series
                  if signal_s - SWAP_WINDOW_S <= s["second"] < done_s + SWAP_WINDOW_S]
        before = [s for s in series
                  if WARMUP_SECONDS <= s["second"] < signal_s - SWAP_WINDOW_S]
        derived.update(
            swap_gap_s=reload["reloaded"].get("gap_s"),
            swap_window_worst_second_p99=max((s["p99"] for s in around), default=None),
            swap_window_max=max((s["max"] for s in around), default=None),
            steady_before_swap_p99=(statistics.median(s["p99"] for s in before)
                                    if before else None))
    return derived


def _median_of(runs: list[dict], key: str):
    values = [r[key] for r in runs if r.get(key) is not None]
    return round(statistics.median(values), 3) if values else None


def summarize(cell: Cell, runs: list[dict], floor: dict | None) -> dict:
    derived = [derive(r) for r in runs]
    median = {k: _median_of(derived, k) for k in derived[0]} if derived else {}
    if floor and median.get("steady_p99") and floor.get("steady_p99"):
        median["steady_ratio"] = round(median["steady_p99"] / floor["steady_p99"], 2)
    at_own_rate = cell.rate == BY_NAME[cell.name].rate
    targets = TARGETS.get(cell.name, {}) if cell.lever == "" and at_own_rate else {}
    checks = {k: (median.get(k) is not None and median[k] <= bound)
              for k, bound in targets.items()}
    if cell.lever == "" and cell.trigger != "passthrough" and at_own_rate:
        first = median.get("run_to_first_alert_s")
        checks["run_to_first_alert_s"] = first is not None and \
            first <= READY_TO_FIRST_ALERT_TARGET_S
    return {"cell": cell.name, "trigger": cell.trigger, "rate": cell.rate, "lever": cell.lever,
            "why": cell.why, "median": median, "targets": targets, "met": checks,
            "runs": runs}


def write_png(summary: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4))
    try:
        for i, run in enumerate(summary["runs"]):
            series = [s for s in run["per_second"] if s["count"] > 0]
            ax.plot([s["second"] for s in series], [max(s["p99"], 0.01) for s in series],
                    marker=".", label=f"run {i + 1}")
        ax.set_yscale("log")
        ax.set_xlabel("second after appliance.ready (scheduled send time)")
        ax.set_ylabel("p99 latency, ms")
        ax.set_title(f"{summary['cell']}: {summary['rate']:,} events/s, per-second p99")
        ax.axvline(WARMUP_SECONDS, color="grey", linestyle=":", linewidth=1)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
        fig.tight_layout()
        fig.savefig(path, dpi=90)
    finally:
        plt.close(fig)


def _fmt(value) -> str:
    return "-" if value is None else f"{value:g}"


def markdown(doc: dict) -> str:
    cols = ("p50", "p99", "p999", "worst_second_p99", "steady_p99", "steady_ratio",
            "run_to_first_alert_s", "alerts_lost", "swap_gap_s", "swap_window_max",
            "steady_before_swap_p99")
    out = [f"# appliance latency bench\n\n`{doc['command']}`\n\n{doc['note']}\n",
           "| cell | lever | rate/s | " + " | ".join(cols) + " | targets |",
           "|---" * (len(cols) + 4) + "|"]
    for s in doc["cells"]:
        met = ", ".join(f"{k} {'ok' if v else 'MISSED'}" for k, v in s["met"].items())
        out.append(f"| {s['cell']} | {s['lever'] or 'defaults'} | {s['rate']:,} | "
                   + " | ".join(_fmt(s["median"].get(c)) for c in cols) + f" | {met} |")
    return "\n".join(out) + "\n"


# -- main -----------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.appliance_latency", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cells", nargs="+", default=[c.name for c in CELLS],
                        help="cells to run (default: all; see --list)")
    parser.add_argument("--seconds", type=float, default=60.0, help="sending seconds per cell")
    parser.add_argument("--runs", type=int, default=3, help="runs per cell (medians)")
    parser.add_argument("--rate", type=int, default=None,
                        help="send this many events/s in every cell instead of the cell's "
                             "own rate (a light smoke run; targets are judged only at the "
                             "cells' own rates)")
    parser.add_argument("--ready-timeout", type=float, default=READY_TIMEOUT_S,
                        help="seconds to wait for appliance.ready (a bound, not a target)")
    parser.add_argument("--producer-linger-ms", type=int, default=PRODUCER_LINGER_MS,
                        help="linger.ms of the driver's event producer (the firehose's "
                             "batching; inside the measured latency)")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--list", action="store_true", help="list the cells and exit")
    args = parser.parse_args([] if argv is None else argv)
    if args.list:
        for c in CELLS:
            print(f"{c.name:28} {c.trigger:12} {c.rate:>6}/s  {c.why}")
        return 0
    unknown = [n for n in args.cells if n not in BY_NAME]
    if unknown or args.seconds <= 0 or args.runs < 1:
        print(f"bench.appliance_latency: --cells: unknown {', '.join(unknown)}" if unknown
              else "bench.appliance_latency: --seconds and --runs must be positive",
              file=sys.stderr)
        return 2
    cells = [BY_NAME[n] for n in args.cells]
    if args.rate is not None:
        cells = [replace(c, rate=args.rate) for c in cells]

    from appliance.broker import EmbeddedBroker

    cp = compile_driver("AlertLatencyBench.java")
    command = (f"python -m bench.appliance_latency --cells {' '.join(args.cells)} "
               f"--seconds {args.seconds:g} --runs {args.runs}"
               + (f" --rate {args.rate}" if args.rate is not None else "")
               + (f" --producer-linger-ms {args.producer_linger_ms}"
                  if args.producer_linger_ms != PRODUCER_LINGER_MS else ""))
    raw: dict[str, list[dict]] = {c.name: [] for c in cells}
    load0 = os.getloadavg()[0]
    started = time.monotonic()
    with EmbeddedBroker() as broker, \
            tempfile.TemporaryDirectory(prefix="bench-appliance-") as tmp:
        broker.create_topics({"appliance.warmup": 2})  # what an operator creates for warm-up
        for run in range(args.runs):
            for cell in cells:
                print(f"bench: run {run + 1}/{args.runs} {cell.name} @ {cell.rate:,}/s "
                      f"for {args.seconds:g} s", file=sys.stderr, flush=True)
                workdir = Path(tmp) / f"{cell.name}-{run}"
                workdir.mkdir()
                try:
                    if cell.trigger == "passthrough":
                        result = run_passthrough_cell(cell, cp, broker, args.seconds, workdir,
                                                      args.producer_linger_ms)
                    else:
                        result = run_appliance_cell(cell, cp, broker, args.seconds, workdir,
                                                    args.ready_timeout,
                                                    args.producer_linger_ms)
                except Exception as exc:  # noqa: BLE001 - one failed cell must not hide the rest
                    print(f"bench: {cell.name} failed: {exc}", file=sys.stderr)
                    result = {"cell": cell.name, "error": str(exc)[:2000]}
                raw[cell.name].append(result)
                if "error" not in result:
                    d = derive(result)
                    print(f"bench:   p50 {d['p50']} p99 {d['p99']} p99.9 {d['p999']} ms, "
                          f"worst second p99 {d['worst_second_p99']} ms, lost "
                          f"{d['alerts_lost']}", file=sys.stderr, flush=True)

    ok = {n: [r for r in rs if "error" not in r] for n, rs in raw.items()}
    floors = {}
    for cell in cells:
        if cell.trigger == "passthrough" and ok[cell.name]:
            floors[cell.rate] = summarize(cell, ok[cell.name], None)["median"]
    summaries = [summarize(c, ok[c.name], floors.get(c.rate)) for c in cells if ok[c.name]]
    doc = {"benchmark": "appliance_latency", "command": command,
           "note": ("fresh `appliance run` per cell, events from its `appliance.ready`; "
                    f"medians of {args.runs} run(s); steady = scheduled second >= "
                    f"{WARMUP_SECONDS}; steady_ratio = steady p99 / passthrough steady p99 "
                    "at the same rate, same run; ms unless named"),
           "floors": floors, "cells": summaries,
           "failed": {n: [r["error"] for r in rs if "error" in r] for n, rs in raw.items()
                      if any("error" in r for r in rs)}}
    machine.write_result(args.out, doc, started, load0)
    args.out.with_suffix(".md").write_text(markdown(doc))
    for s in summaries:
        write_png(s, args.out.with_name(f"{args.out.stem}-{s['cell']}.png"))
    print(markdown(doc))
    print(f"and {args.out.with_suffix('.md')}, per-cell PNGs", file=sys.stderr)
    lost = any(s["median"].get("alerts_lost") for s in summaries)
    return 1 if doc["failed"] or lost else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
