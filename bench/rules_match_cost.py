"""The rule book's own cost per event at 1, 1,000 and 10,000 rules, with nothing around it.

Why its own bench: ``bench.rules_throughput`` measures what users run (a fresh appliance,
Kafka, the load driver), so its figures carry the whole pipeline's noise, and a ladder of
x1.5 steps. Here one Java process per run (``bench/java/io/appliance/rules/
RuleMatchBench.java``) compiles a generated rules file (``bench._rule_sets``) with the
appliance's SQL settings and feeds one task's evaluator (``TaskRules``) the load driver's
events in a loop on one thread: nanoseconds per event, for each rule count, as a ratio to
one rule's in the same run. Each run is a fresh JVM; the runs are interleaved across the
counts; a run's figure is the median of its rounds after ``--warmup`` (the JIT's), and
a count's figure the median of its runs'.

``--connector-jar`` runs it against another build of the connector (an older commit's
``make connector``) to compare two versions of the evaluator on the same machine and minute.

    .venv/bin/python -m bench.rules_match_cost                      # ~2 min
    .venv/bin/python -m bench.rules_match_cost --connector-jar /tmp/old/connector.jar

Writes ``reports/bench/rules_match_cost.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from appliance.connector import CONNECTOR_JAR
from appliance.events import EVENT_DDL, REQUIRED
from appliance.rules.rule_book import INDEX_PREFERENCE, rules_json
from appliance.rules.rules_file import parse_rule_set
from appliance.trigger import MODES
from appliance.tuning import sql_settings, tuning_for
from bench import _rule_sets as rule_sets
from bench._java import compile_driver
from bench._machine import write_result

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "reports" / "bench" / "rules_match_cost.json"
SOURCE = "io/appliance/rules/RuleMatchBench.java"
MAIN = "io.appliance.rules.RuleMatchBench"
COUNTS = (1, 1000, 10000)
RUN_TIMEOUT_S = 300.0


def inputs(counts: list[int], workdir: Path) -> tuple[dict[int, Path], Path]:
    """Written once for every run: each count's rules JSON, and the appliance's SQL
    settings with the event schema and index facts the compiler takes (``RuleBook``'s
    own: ``EVENT_DDL``, ``INDEX_PREFERENCE``, the required fields)."""
    rules = {}
    for count in counts:
        rules[count] = workdir / f"rules-{count}.json"
        rules[count].write_text(rules_json(parse_rule_set(
            rule_sets.dump(rule_sets.rules_doc(count)), f"generated-{count}.yml")))
    settings = workdir / "compile.conf"
    conf = sql_settings(tuning_for(MODES["continuous"]).spark_conf)
    facts = {"@ddl": EVENT_DDL, "@preference": ",".join(INDEX_PREFERENCE),
             "@present": ",".join(f.name for f in REQUIRED)}
    settings.write_text("".join(f"{k}={v}\n" for k, v in {**facts, **conf}.items()))
    return rules, settings


def one_run(count: int, rules: Path, settings: Path, cp: str, seconds: float,
            rounds: int) -> dict:
    """One fresh JVM over ``count`` generated rules: its per-round ns per event."""
    done = subprocess.run(["java", "-Xmx2g", "-cp", cp, MAIN, str(rules), str(settings),
                           str(seconds), str(rounds)],
                          capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"RuleMatchBench with {count} rules exited {done.returncode}: "
                           f"{done.stderr.strip().splitlines()[-1:]}")
    return json.loads(lines[-1])


def summarize(count: int, runs: list[dict], warmup: int) -> dict:
    steady = [statistics.median(r["ns_per_event"][warmup:]) for r in runs]
    return {"rules": count, "candidates_per_event": runs[0]["candidates_per_event"],
            "index": runs[0]["index"], "ns_per_event": round(statistics.median(steady), 1),
            "runs_ns_per_event": [round(s, 1) for s in steady],
            "first_round_ns_per_event": [round(r["ns_per_event"][0], 1) for r in runs]}


def markdown(doc: dict) -> str:
    lines = [f"# Rule book cost per event\n\n`{doc['command']}`\n\n{doc['note']}\n",
             "| rules | candidates per event | ns per event (runs) | x 1 rule | first round ns |",
             "|---:|---:|---:|---:|---|"]
    for c in doc["cells"]:
        runs = ", ".join(f"{v:g}" for v in c["runs_ns_per_event"])
        first = ", ".join(f"{v:g}" for v in c["first_round_ns_per_event"])
        lines.append(f"| {c['rules']:,} | {c['candidates_per_event']:g} | "
                     f"{c['ns_per_event']:g} ({runs}) | x{c['ratio_to_one_rule']} | {first} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.rules_match_cost", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--counts", type=int, nargs="+", default=list(COUNTS))
    parser.add_argument("--runs", type=int, default=3, help="fresh JVMs per count")
    parser.add_argument("--rounds", type=int, default=8, help="timed rounds per run")
    parser.add_argument("--warmup", type=int, default=3,
                        help="first rounds left out of a run's figure (the JIT's)")
    parser.add_argument("--seconds", type=float, default=1.0, help="seconds per round")
    parser.add_argument("--connector-jar", type=Path, default=CONNECTOR_JAR)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args([] if argv is None else argv)
    if (min(args.counts) < 1 or args.runs < 1 or args.seconds <= 0
            or not 0 <= args.warmup < args.rounds):
        print("bench.rules_match_cost: counts >= 1, runs >= 1, seconds > 0, "
              "0 <= --warmup < --rounds", file=sys.stderr)
        return 2
    if not args.connector_jar.is_file():
        print(f"bench.rules_match_cost: --connector-jar {args.connector_jar}: no such file "
              f"(make connector builds it)", file=sys.stderr)
        return 2
    counts = sorted(set(args.counts))
    cp = compile_driver(SOURCE, before=(args.connector_jar,))
    started, load0 = time.monotonic(), os.getloadavg()[0]
    by_count: dict[int, list[dict]] = {c: [] for c in counts}
    with tempfile.TemporaryDirectory(prefix="bench-rules-match-") as tmp:
        rules, settings = inputs(counts, Path(tmp))
        for run in range(args.runs):
            for count in counts:
                print(f"bench: run {run + 1} of {args.runs}: {count:,} rules", file=sys.stderr,
                      flush=True)
                by_count[count].append(one_run(count, rules[count], settings, cp,
                                               args.seconds, args.rounds))
    cells = [summarize(c, runs, args.warmup) for c, runs in by_count.items()]
    one = next((c["ns_per_event"] for c in cells if c["rules"] == 1), None)
    for c in cells:
        c["ratio_to_one_rule"] = round(c["ns_per_event"] / one, 2) if one else None
    command = "python -m bench.rules_match_cost " + " ".join(argv or [])
    doc = {"benchmark": "rules_match_cost", "command": command.strip(),
           "connector_jar": str(args.connector_jar),
           "note": (f"one task's evaluator on one thread, the load driver's events; "
                    f"{args.runs} fresh JVMs per count, interleaved; a run's figure is the "
                    f"median of rounds {args.warmup + 1}-{args.rounds} of {args.seconds:g} s; "
                    f"load average {load0:.1f} at the start"),
           "cells": cells}
    write_result(args.out, doc, started, load0)
    args.out.with_suffix(".md").write_text(markdown(doc))
    print(markdown(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
