"""A pair around a loss (issue 50): the longest wait for an alert when the active instance
is killed, frozen or handed over, beside a lone instance killed and restarted.

Each run is a fresh pair, as an operator starts one: two ``appliance run`` processes whose
configs differ only in ``[metrics] port``, one embedded broker, the warmed Java driver of
``bench.appliance_latency`` released at the active's ``appliance.ready`` and sending
open-loop; ``--fault-at`` seconds later the fault strikes, and the load goes on for
``--after`` seconds more. Latency runs from each event's *scheduled* send time to its
alert read back, so the takeover's gap counts in full.

Scenarios (``--scenarios``):

- ``kill9``: SIGKILL of the active's process group (a crash): the standby takes over once
  the active's membership lapses (``[ha] session_timeout``) and its query starts;
- ``sigstop``: SIGSTOP of the active's group (a frozen host); SIGCONT 30 s later, when the
  fenced instance steps down and waits as the standby;
- ``handover``: ``appliance ha handover`` (a planned switch, what a deploy does);
- ``lone-kill9``: the baseline, no pair: one instance killed and started again at once on
  its checkpoint (what systemd's ``Restart=`` does);
- ``lone-restart``: no pair either: SIGTERM to the instance alone (a ``systemctl restart``
  or a deploy's upgrade of a lone instance: the unit's ``KillMode=mixed``), and started
  again on its checkpoint once it exited. Its duplicates are what the next run replayed
  (a real-time stop ends its batch first: ``appliance.process.query_stop``).

Reported per run: the longest wait for any alert (``max``), p99 over the whole run, the
per-second p99 series, the worst second after the fault, the first minute after it
against the steady seconds before it, alerts lost and duplicates, the takeover as the new
active logged it (``ha.elected`` to ``ha.active``), and the waiting standby's cost (its
process tree's CPU share and resident memory over ``--standby-window`` seconds before the
load starts). Medians over ``--runs`` runs (the scenarios in rounds).

    .venv/bin/python -m bench.ha_pair                                  # everything
    .venv/bin/python -m bench.ha_pair --triggers continuous --rates 1000 --runs 1 \\
        --scenarios kill9 lone-kill9                                   # a smoke run
    .venv/bin/python -m bench.ha_pair --scenarios handover --master spark://127.0.0.1:7077 \\
        --spark-conf spark.cores.max=4 --spark-conf spark.executor.cores=2  # on a cluster

``--master spark://...`` runs each instance as its own application on a standalone
cluster (started beforehand, its workers with room for both), as the deploy does.

Writes ``reports/bench/ha_pair.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from appliance.broker import EmbeddedBroker
from appliance.config import HA_SESSION_MIN_MS, Config, HaConfig, TopicsConfig
from appliance.config import write_config as write_config_file
from appliance.process import process_group
from appliance.process.cpu_affinity import tree
from appliance.process.logwatch import log_events, wait_for_event
from appliance.topics import default_partitions
from bench._cells import BY_NAME
from bench._java import compile_driver
from bench._machine import process_cpu_s, write_result
from bench.appliance_latency import READY_TIMEOUT_S, ROOT, RULES, Driver

OUT = ROOT / "reports" / "bench" / "ha_pair.json"
SCENARIOS = ("kill9", "sigstop", "handover", "lone-kill9", "lone-restart")
#: The scenarios of one instance, no pair: the baselines.
LONE = ("lone-kill9", "lone-restart")
SESSION_S = HaConfig().session_timeout_ms / 1000  # [ha] session_timeout's default
FROZEN_S = 30.0            # how long sigstop keeps the old active frozen
#: The new active's log events between ``ha.elected`` and ``ha.active`` (the bench reports
#: when each came): where a takeover's seconds go.
TAKEOVER_STEPS = ("ha.offsets_from_kafka", "ha.offsets_floor", "ha.offsets_none",
                  "query.started", "query.processing", "ha.caught_up", "ha.active")
#: The issue's targets: the longest wait for any alert, ms.
LONGEST_WAIT_TARGET_MS = {"kill9": 5000, "sigstop": 5000, "handover": 1000}


@dataclass(frozen=True)
class Instance:
    """One ``appliance run`` of the bench: its process, config and log."""

    name: str
    proc: subprocess.Popen
    config: Path
    log: Path

    def events(self, name: str) -> list[dict]:
        return [e for e in log_events(self.log) if e.get("event") == name]

    def stop(self) -> int | None:
        return process_group.stop(self.proc, grace=60)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spark_section(cell_spark: dict[str, str], master: str,
                  spark_conf: dict[str, str]) -> dict[str, str]:
    """``[spark]``: ``local[2]``, or a standalone cluster's master (its executors reach the
    driver on loopback, as the deploy's reach it on the cluster address)."""
    cluster = {"driver_host": "127.0.0.1", "driver_bind_address": "127.0.0.1"} \
        if master.startswith("spark://") else {}
    return {"master": master, **cluster, **cell_spark, **spark_conf}


def write_config(trigger: str, bootstrap: str, topics: dict[str, str], checkpoint: Path,
                 path: Path, group: str | None, session_s: float = SESSION_S,
                 master: str = "local[2]", spark_conf: dict[str, str] | None = None) -> Path:
    """What an operator writes; a pair's two differ only in the metrics port."""
    cell = BY_NAME[trigger]
    doc = {"kafka": {"bootstrap_servers": bootstrap}, "topics": topics,
           "query": {"trigger": trigger, "checkpoint_dir": str(checkpoint),
                     "starting_offsets": "latest", **cell.query},
           "rules": {"path": str(RULES)},
           "spark": spark_section(cell.spark, master, spark_conf or {}),
           "metrics": {"port": _free_port()}}
    if group is not None:
        doc["ha"] = {"group": group, "session_timeout": f"{session_s:g} seconds"}
    return write_config_file(Config.model_validate(doc), path)


def start(name: str, config: Path, workdir: Path) -> Instance:
    log = workdir / f"{name}.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("APPLIANCE_")}
    with log.open("ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "appliance", "run", "--config",
                                 str(config)], stdout=out, stderr=subprocess.STDOUT, env=env,
                                cwd=ROOT, start_new_session=True)
    return Instance(name, proc, config, log)


def tree_rss_mb(pid: int) -> float:
    total = 0
    for p in tree(pid):
        try:
            with open(f"/proc/{p}/status") as f:
                total += next((int(line.split()[1]) for line in f if line.startswith("VmRSS")),
                              0)
        except OSError:
            continue
    return round(total / 1024, 1)


def tree_cpu_s(pid: int) -> float:
    total = 0.0
    for p in tree(pid):
        try:
            total += process_cpu_s(p)
        except OSError:
            continue
    return total


def standby_cost(standby: Instance, window_s: float) -> dict:
    """The waiting standby's CPU share (of one core) and memory over ``window_s``."""
    cpu0, wall0 = tree_cpu_s(standby.proc.pid), time.monotonic()
    time.sleep(window_s)
    cpu1, wall1 = tree_cpu_s(standby.proc.pid), time.monotonic()
    return {"cpu_percent_of_a_core": round(100 * (cpu1 - cpu0) / (wall1 - wall0), 1),
            "rss_mb": tree_rss_mb(standby.proc.pid), "window_s": window_s}


def _ts(event: dict) -> float:
    return datetime.fromisoformat(event["timestamp"]).timestamp()


class Fault:
    """Strikes ``scenario`` ``at_s`` after the load starts, on its own thread; records
    what happened for the run's report."""

    def __init__(self, scenario: str, at_s: float, active: Instance,
                 standby: Instance | None, workdir: Path) -> None:
        self.scenario, self.at_s = scenario, at_s
        self.active, self.standby, self.workdir = active, standby, workdir
        self.struck_at: float | None = None
        self.restarted: Instance | None = None
        self.stopped_after_s: float | None = None  # lone-restart: the old one's exit
        self.error: str | None = None
        self._thread = threading.Timer(at_s, self._strike)

    def begin(self) -> None:
        self._thread.start()

    def _strike(self) -> None:
        try:
            self.struck_at = time.time()
            if self.scenario in ("kill9", "lone-kill9"):
                process_group.signal_group(self.active.proc.pid, signal.SIGKILL)
                self.active.proc.wait(timeout=30)
            elif self.scenario == "lone-restart":
                self.active.proc.send_signal(signal.SIGTERM)
                self.active.proc.wait(timeout=90)
                self.stopped_after_s = round(time.time() - self.struck_at, 2)
            if self.scenario in LONE:
                self.restarted = start(f"{self.active.name}-again", self.active.config,
                                       self.workdir)
            if self.scenario == "sigstop":
                process_group.signal_group(self.active.proc.pid, signal.SIGSTOP)
                time.sleep(FROZEN_S)
                process_group.signal_group(self.active.proc.pid, signal.SIGCONT)
            elif self.scenario == "handover":
                assert self.standby is not None
                subprocess.run([sys.executable, "-m", "appliance", "ha", "handover", "--config",
                                str(self.standby.config), "--timeout", "2m"],
                               capture_output=True, text=True, cwd=ROOT, timeout=180,
                               check=True)
        except Exception as exc:  # noqa: BLE001 - reported with the run
            self.error = f"{type(exc).__name__}: {exc}"

    def join(self) -> None:
        self._thread.join(timeout=FROZEN_S + 240)

    def serving(self) -> dict:
        """When the instance serving after the fault logged it served, from the strike."""
        if self.struck_at is None:
            return {}
        if self.scenario in LONE:
            ready = self.restarted.events("appliance.ready") if self.restarted else []
            out: dict[str, object] = {}
            if ready:
                out["ready_after_s"] = round(_ts(ready[-1]) - self.struck_at, 2)
            if self.stopped_after_s is not None:
                out["stopped_after_s"] = self.stopped_after_s
                ended = self.active.events("query.batch_ended")
                if ended:
                    out["batch_end_s"] = ended[-1].get("seconds")
            return out
        assert self.standby is not None
        elected = [e for e in self.standby.events("ha.elected") if _ts(e) >= self.struck_at]
        active = [e for e in self.standby.events("ha.active") if _ts(e) >= self.struck_at]
        out = {}
        if elected:
            out["elected_after_s"] = round(_ts(elected[0]) - self.struck_at, 2)
        if active:
            out["serving_after_s"] = round(_ts(active[0]) - self.struck_at, 2)
            out["takeover_s"] = active[0].get("takeover_s")
        if elected:
            out["takeover_steps"] = self.takeover_steps(_ts(elected[0]))
        out["false_takeovers"] = self.false_takeovers()
        # The new active losing its role again while nobody else was there to take it (a
        # membership that lapsed on a starved machine): a gap of its own.
        out["fenced_after_takeover"] = sum(
            1 for e in self.standby.events("ha.fenced") if _ts(e) >= self.struck_at)
        return out

    def false_takeovers(self) -> int:
        """Role changes before the fault, the steady run under load: the standby elected
        or the active fenced while both were alive and well (a session too short for the
        machine's hiccups)."""
        assert self.standby is not None and self.struck_at is not None
        struck_at = self.struck_at
        return (sum(1 for e in self.standby.events("ha.elected") if _ts(e) < struck_at)
                + sum(1 for e in self.active.events("ha.fenced") if _ts(e) < struck_at))

    def takeover_steps(self, elected_at: float) -> dict[str, float]:
        """Seconds from ``ha.elected`` to each step of the new active's start that it
        logged, in order: where the time between the election and serving goes."""
        assert self.standby is not None
        steps = {}
        for event in log_events(self.standby.log):
            name = event.get("event")
            if name in TAKEOVER_STEPS and name not in steps and _ts(event) >= elected_at:
                steps[name] = round(_ts(event) - elected_at, 3)
                if name == "query.started":  # its own split: planning, Spark's start()
                    steps["query.planned_s"] = event.get("planned_s")
                    steps["query.start_s"] = event.get("start_s")
        return steps


def derive(result: dict, fault_at: float) -> dict:
    """The run's figures: whole-run latency, the seconds around the fault."""
    lat = result["latency_ms"]
    series = [s for s in result["per_second"] if s["count"] > 0]
    before = [s["p99"] for s in series if 10 <= s["second"] < fault_at]
    after = [s for s in series if s["second"] >= fault_at]
    minute = [s["p99"] for s in after if s["second"] < fault_at + 60]
    return {"max": lat["max"], "p99": lat["p99"], "p999": lat["p999"],
            "steady_p99_before": round(statistics.median(before), 3) if before else None,
            "worst_second_after": max((s["p99"] for s in after), default=None),
            "first_minute_after_p99_median": round(statistics.median(minute), 3)
            if minute else None,
            "alerts_lost": result["alerts_lost"], "duplicates": result["duplicates"]}


def run_once(scenario: str, trigger: str, rate: int, cp: str, broker, args,
             workdir: Path) -> dict:
    tag = f"{scenario}-{trigger}-{uuid.uuid4().hex[:6]}"
    topics = {"events": f"{tag}-events", "alerts": f"{tag}-alerts",
              "dead_letters": f"{tag}-dlq"}
    partitions = default_partitions(TopicsConfig(**topics))
    broker.create_topics(partitions)
    checkpoint = workdir / "checkpoints"
    pair = scenario not in LONE
    group = f"bench-{tag}" if pair else None
    configs = [write_config(trigger, broker.bootstrap, topics, checkpoint,
                            workdir / f"{n}.toml", group, args.session_timeout,
                            args.master, dict(args.spark_conf))
               for n in ("a", "b")[:1 + pair]]
    seconds = args.fault_at + args.after
    instances: list[Instance] = []
    fault: Fault | None = None
    try:
        with Driver(cp, broker, topics, rate, seconds, partitions[topics["events"]],
                    workdir) as driver:
            active = start("a", configs[0], workdir)
            instances.append(active)
            wait_for_event(active.log, "appliance.ready", active.proc, args.ready_timeout)
            standby = None
            cost = None
            if pair:
                standby = start("b", configs[1], workdir)
                instances.append(standby)
                wait_for_event(standby.log, "ha.standby", standby.proc, args.ready_timeout)
                cost = standby_cost(standby, args.standby_window)
            fault = Fault(scenario, args.fault_at, active, standby, workdir)
            fault.begin()
            result = driver.measure()
            fault.join()
            if fault.restarted is not None:
                instances.append(fault.restarted)
    finally:
        if fault is not None:
            fault.join()
            if fault.restarted is not None and fault.restarted not in instances:
                instances.append(fault.restarted)
        for inst in instances:
            inst.stop()
            if args.logs is not None:  # kept for a look at where a takeover's time went
                args.logs.mkdir(parents=True, exist_ok=True)
                shutil.copy(inst.log, args.logs / f"{tag}-{inst.log.name}")
        shutil.rmtree(checkpoint, ignore_errors=True)
    return {"scenario": scenario, "trigger": trigger, "rate": rate,
            **derive(result, args.fault_at), **fault.serving(),
            "fault_error": fault.error, "standby": cost,
            "per_second": [{"second": s["second"], "p99": s["p99"], "max": s["max"]}
                           for s in result["per_second"]]}


def _median(rows: list[dict], key: str):
    values = [r[key] for r in rows if isinstance(r.get(key), (int, float))]
    return round(statistics.median(values), 3) if values else None


def summarize(rows: list[dict]) -> list[dict]:
    keys = ("max", "p99", "p999", "steady_p99_before", "worst_second_after",
            "first_minute_after_p99_median", "alerts_lost", "duplicates", "elected_after_s",
            "serving_after_s", "ready_after_s", "stopped_after_s", "batch_end_s")
    out = []
    for cell in sorted({(r["scenario"], r["trigger"], r["rate"]) for r in rows}):
        runs = [r for r in rows if (r["scenario"], r["trigger"], r["rate"]) == cell]
        summary = {"scenario": cell[0], "trigger": cell[1], "rate": cell[2],
                   "runs": len(runs), **{k: _median(runs, k) for k in keys}}
        standby = [r["standby"] for r in runs if r.get("standby")]
        if standby:
            summary["standby_cpu_percent"] = _median(standby, "cpu_percent_of_a_core")
            summary["standby_rss_mb"] = _median(standby, "rss_mb")
        for key in ("false_takeovers", "fenced_after_takeover"):
            if any(key in r for r in runs):
                summary[key] = sum(r.get(key, 0) for r in runs)
        target = LONGEST_WAIT_TARGET_MS.get(cell[0])
        summary["longest_wait_target_ms"] = target
        out.append(summary)
    return out


def markdown(doc: dict) -> str:
    lines = [f"# {doc['benchmark']}", "", f"`{doc['command']}`", "", doc["note"], "",
             "| scenario | trigger | rate | longest wait ms (target) | p99 | steady p99 before "
             "| worst second after | first minute p99 | lost | dup | serving after s "
             "| standby CPU % / MB |", "|" + "---|" * 12]
    for s in doc["summary"]:
        serving = s.get("serving_after_s") or s.get("ready_after_s")
        standby = (f"{s['standby_cpu_percent']} / {s['standby_rss_mb']}"
                   if s.get("standby_cpu_percent") is not None else "")
        lines.append(f"| {s['scenario']} | {s['trigger']} | {s['rate']:,} | {s['max']} "
                     f"({s['longest_wait_target_ms'] or '-'}) | {s['p99']} | "
                     f"{s['steady_p99_before']} | {s['worst_second_after']} | "
                     f"{s['first_minute_after_p99_median']} | {s['alerts_lost']} | "
                     f"{s['duplicates']} | {serving} | {standby} |")
    return "\n".join(lines) + "\n"


def _conf_pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.startswith("spark."):
        raise argparse.ArgumentTypeError(f"{text!r}: expected spark.KEY=VALUE")
    return key, value


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bench.ha_pair", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenarios", nargs="+", choices=SCENARIOS, default=list(SCENARIOS))
    ap.add_argument("--triggers", nargs="+", choices=("continuous", "realtime", "microbatch"),
                    default=["continuous", "realtime", "microbatch"])
    ap.add_argument("--rates", nargs="+", type=int, default=[1000, 10000])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--fault-at", type=float, default=20.0,
                    help="seconds after the load starts (default: 20)")
    ap.add_argument("--after", type=float, default=70.0,
                    help="seconds of load after the fault (default: 70)")
    ap.add_argument("--session-timeout", type=float, default=SESSION_S,
                    help=f"[ha] session_timeout, seconds (default: {SESSION_S:g}, the "
                         f"config's; the bench's broker takes down to "
                         f"{HA_SESSION_MIN_MS / 1000:g})")
    ap.add_argument("--master", default="local[2]",
                    help="[spark] master: local[2] (default), or a standalone cluster's "
                         "spark://host:port (each instance its own application)")
    ap.add_argument("--spark-conf", type=_conf_pair, action="append", default=[],
                    metavar="KEY=VALUE", help="a [spark] entry (repeatable), e.g. "
                    "spark.cores.max=4 for a pair sharing a cluster")
    ap.add_argument("--standby-window", type=float, default=10.0)
    ap.add_argument("--ready-timeout", type=float, default=READY_TIMEOUT_S)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--logs", type=Path, default=None,
                    help="keep each run's instance logs in this folder")
    args = ap.parse_args(argv)
    started, load0 = time.monotonic(), os.getloadavg()[0]
    cp = compile_driver("AlertLatencyBench.java")
    rows = []
    # Its groups take sessions down to [ha]'s floor, as the appliance's embedded broker's.
    short_sessions = ["--group-min-session-timeout-ms", str(HA_SESSION_MIN_MS)]
    with EmbeddedBroker(extra_args=short_sessions) as broker, \
            tempfile.TemporaryDirectory(prefix="bench-pair-") as tmp:
        broker.create_topics({"appliance.warmup": 2})
        for run in range(args.runs):
            for trigger in args.triggers:
                for rate in args.rates:
                    for scenario in args.scenarios:
                        print(f"bench: run {run + 1}/{args.runs} {scenario} {trigger} "
                              f"@ {rate:,}/s", file=sys.stderr, flush=True)
                        workdir = Path(tempfile.mkdtemp(prefix=f"{scenario}-", dir=tmp))
                        try:
                            row = run_once(scenario, trigger, rate, cp, broker, args, workdir)
                        except Exception as exc:  # noqa: BLE001 - one failed run, not all
                            print(f"bench:   failed: {exc}", file=sys.stderr, flush=True)
                            rows.append({"scenario": scenario, "trigger": trigger,
                                         "rate": rate, "error": str(exc)[:2000]})
                            continue
                        rows.append(row)
                        print(f"bench:   longest wait {row['max']} ms, p99 {row['p99']} ms, "
                              f"lost {row['alerts_lost']}, serving after "
                              f"{row.get('serving_after_s', row.get('ready_after_s'))} s",
                              file=sys.stderr, flush=True)
    ok = [r for r in rows if "error" not in r]
    doc = {"benchmark": "ha_pair", "command": "python -m bench.ha_pair " + " ".join(argv or []),
           "note": (f"fresh pair (or lone instance) per run; load from the active's "
                    f"appliance.ready, the fault {args.fault_at:g} s later, "
                    f"{args.after:g} s after it; [ha] session_timeout {args.session_timeout:g} s; "
                    f"medians of {args.runs} run(s); ms unless named"),
           "summary": summarize(ok), "runs": rows,
           "failed": [r for r in rows if "error" in r]}
    write_result(args.out, doc, started, load0)
    args.out.with_suffix(".md").write_text(markdown(doc))
    print(markdown(doc))
    return 1 if doc["failed"] or any(r["alerts_lost"] for r in ok) else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
