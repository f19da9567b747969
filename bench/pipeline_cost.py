"""CPU per record of the appliance's transformation, in one JVM, from memory into ``noop``.

The latency cells (``bench.appliance_latency``) measure what users get end to end, and on
two shared cores every microsecond a record costs shows up there as queueing. This module
isolates that cost: ``--records`` events shaped like the latency bench's (its driver's
JSON, every 10th alerting on ``examples/rules.yml``, ``--bad-every``-th a dead letter) are
built once and cached in memory, then the query's exact ``transform`` (or only its parse
step, ``--stage parse``) runs over them into Spark's ``noop`` sink, ``--warm`` rounds to
let the JIT settle and ``--runs`` measured rounds, all in one ``local[1]`` JVM.

Per round it reads wall time and CPU time: the whole JVM's (``/proc/<pid>/stat``) and the
task thread's alone (``/proc/<pid>/task/*``, threads named ``Executor task launch
worker``), which leaves out the JIT compilers and the GC and so moves least when other
processes share the cores. Medians over the rounds, in microseconds per record.

    .venv/bin/python -m bench.pipeline_cost                       # 200,000 records, 7 runs
    .venv/bin/python -m bench.pipeline_cost --records 20000 --warm 1 --runs 1   # smoke

How the cost grows with the rules: ``--rules 1 100 1000 10000`` measures the transform with
each generated rules file (``bench._rule_sets``: the driver's events are candidates for
about one rule in 200) in the same JVM, with the rule book the appliance runs and, with
``--naive``, the reference that compiles every rule into the plan (``NaiveRules``, up to
``--naive-max`` rules: its plan and generated code grow with the count).

Writes ``reports/bench/pipeline_cost.json``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from bench._machine import process_cpu_s, write_result

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "reports" / "bench" / "pipeline_cost.json"
RULES = ROOT / "examples" / "rules.yml"
TASK_THREAD = "Executor task "  # /proc's comm keeps 15 bytes of "Executor task launch worker"

# The latency driver's event (bench/java/AlertLatencyBench.java), built by Spark itself.
_EVENT = ("concat('{\"event_id\":\"', CASE WHEN id % 10 = 0 THEN 'a-' ELSE 'n-' END, id, "
          "'\",\"ts\":', 1700000000000 + id, ',\"source\":\"bench-', id % 64, "
          "'\",\"metric\":\"cpu.util\",\"value\":', "
          "CASE WHEN id % 10 = 0 THEN '97.5' ELSE CAST(id % 90 AS STRING) END, "
          "',\"tags\":{\"dc\":\"b\"}}')")
_BAD = "'{\"event_id\": 1, \"ts\": \"x\", \"source\": \"s\", \"metric\": \"m\"}'"


@dataclass(frozen=True)
class Round:
    wall_s: float
    process_cpu_s: float
    task_cpu_s: float


def _jiffies(path: str) -> int:
    with open(path) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def task_cpu_s(pid: int) -> float:
    """CPU seconds of the JVM's task threads so far (threads that ended are not counted:
    local mode keeps its task thread pool alive between jobs)."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                if not f.read().startswith(TASK_THREAD):
                    continue
            total += _jiffies(f"/proc/{pid}/task/{tid}/stat")
        except OSError:
            continue
    return total / os.sysconf("SC_CLK_TCK")


def records_frame(spark, count: int, bad_every: int):
    value = f"CAST({_EVENT} AS BINARY)"
    if bad_every > 0:
        value = f"CASE WHEN id % {bad_every} = 7 THEN CAST({_BAD} AS BINARY) ELSE {value} END"
    return spark.range(0, count, 1, 1).selectExpr(
        "CAST(NULL AS BINARY) AS key", f"{value} AS value", "'events' AS topic",
        "0 AS partition", "id AS offset", "current_timestamp() AS timestamp",
        "0 AS timestampType")


def _rules(count: int):
    from appliance.rules.rules_file import parse_rule_set
    from bench._rule_sets import dump, rules_doc

    text = RULES.read_text() if count == 0 else dump(rules_doc(count))
    return parse_rule_set(text, f"rules-{count}")


def measure(args) -> dict:
    from appliance.config import Config
    from appliance.process.session import build_session

    config = Config.model_validate({"spark": {"master": "local[1]"},
                                    "query": {"trigger": "continuous"}})
    spark = build_session(config, app_name="pipeline-cost")
    pid = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
    records = records_frame(spark, args.records, args.bad_every).cache()
    records.count()
    if args.stage == "parse" or not args.rules:
        result = _measure_one(args, spark, pid, records, 0, "book")
    else:
        result = {"by_rules": []}
        for count in args.rules:
            for evaluation in ("book", "naive") if args.naive else ("book",):
                if evaluation == "naive" and count > args.naive_max:
                    continue
                one = _measure_one(args, spark, pid, records, count, evaluation)
                print(f"pipeline_cost: {count} rules, {evaluation}: {one['task_cpu_us']} us "
                      f"task CPU per record (plan {one['plan_s']} s)", file=sys.stderr,
                      flush=True)
                result["by_rules"].append({"rules": count, "evaluation": evaluation, **one})
    spark.stop()
    return result


def _measure_one(args, spark, pid: int, records, count: int, evaluation: str) -> dict:
    from appliance.config import TopicsConfig
    from appliance.query.pipeline import parse_events, transform
    from appliance.rules.naive_rules import NaiveRules
    from appliance.rules.rule_book import RuleBook

    planned = time.monotonic()
    book = None
    if args.stage == "parse":
        out = parse_events(records)
    else:
        rules = _rules(count)
        evaluator = (NaiveRules(rules) if evaluation == "naive"
                     else (book := RuleBook.holding(spark, rules)))
        out = transform(records, evaluator, TopicsConfig())
    plan_s = round(time.monotonic() - planned, 3)
    rounds: list[Round] = []
    for i in range(args.warm + args.runs):
        wall0, cpu0, task0 = time.monotonic(), process_cpu_s(pid), task_cpu_s(pid)
        out.write.format("noop").mode("overwrite").save()
        done = Round(wall_s=time.monotonic() - wall0, process_cpu_s=process_cpu_s(pid) - cpu0,
                     task_cpu_s=task_cpu_s(pid) - task0)
        label = "warm" if i < args.warm else "run"
        print(f"pipeline_cost: {label} {i + 1}: {done.wall_s:.3f} s wall, "
              f"{done.task_cpu_s:.2f} s task CPU", file=sys.stderr, flush=True)
        if i >= args.warm:
            rounds.append(done)
    if book is not None:
        book.close()
    per = 1e6 / args.records
    return {
        "plan_s": plan_s,
        "wall_us": round(statistics.median(r.wall_s for r in rounds) * per, 3),
        "process_cpu_us": round(statistics.median(r.process_cpu_s for r in rounds) * per, 3),
        "task_cpu_us": round(statistics.median(r.task_cpu_s for r in rounds) * per, 3),
        "rounds": [asdict(r) for r in rounds],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.pipeline_cost", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--warm", type=int, default=4, help="rounds before the measured ones")
    parser.add_argument("--runs", type=int, default=7, help="measured rounds (medians)")
    parser.add_argument("--bad-every", type=int, default=50,
                        help="every Nth record is a dead letter (0: none)")
    parser.add_argument("--stage", choices=("transform", "parse"), default="transform")
    parser.add_argument("--rules", type=int, nargs="*", default=[], metavar="N",
                        help="rule counts to measure, each a generated rules file "
                             "(default: the shipped example rules only)")
    parser.add_argument("--naive", action="store_true",
                        help="with --rules: the plan-compiled reference evaluation too")
    parser.add_argument("--naive-max", type=int, default=100, metavar="N",
                        help="the most rules the reference is measured with (default: "
                             "%(default)s; with 1,000 its generated code ran the 1 GiB "
                             "driver out of memory)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args([] if argv is None else argv)
    if args.records < 1 or args.runs < 1 or args.warm < 0 or args.bad_every < 0:
        print("bench.pipeline_cost: --records and --runs must be positive, --warm and "
              "--bad-every not negative", file=sys.stderr)
        return 2
    started, load0 = time.monotonic(), os.getloadavg()[0]
    result = measure(args)
    command = (f"python -m bench.pipeline_cost --records {args.records} --warm {args.warm} "
               f"--runs {args.runs} --bad-every {args.bad_every} --stage {args.stage}"
               + (f" --rules {' '.join(map(str, args.rules))}" if args.rules else "")
               + (f" --naive --naive-max {args.naive_max}" if args.naive else ""))
    doc = {"benchmark": "pipeline_cost", "command": command,
           "note": "microseconds per record, medians of the measured rounds; task = the "
                   "executor task thread's CPU (no JIT, no GC)",
           **result}
    write_result(args.out, doc, started, load0)
    for row in result.get("by_rules", [result]):
        label = f"{row['rules']} rules, {row['evaluation']}" if "rules" in row else args.stage
        print(f"pipeline_cost ({label}): {row['wall_us']} us wall, "
              f"{row['process_cpu_us']} us JVM CPU, {row['task_cpu_us']} us task CPU per "
              f"record (load {load0:.1f} -> {doc['machine']['load_avg_end']:.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
