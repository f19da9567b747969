"""The cells of ``bench.appliance_latency``: one row per measured configuration.

A cell is what a user runs (a fresh ``appliance run`` with the shipped defaults) or that
with ONE lever switched back, so the ablation table reads "what this lever is worth" at the
same rate in the same bench run. ``passthrough`` is the floor: a JVM that consumes events
and produces the alerting ones, no Spark, on the same broker.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from appliance.trigger import trigger_mode
from appliance.tuning import JIT_BELOW_TASKS
from bench._sched import GC_CONCURRENT_THREADS, JIT_THREADS, Affinity, Priority, ThreadPolicy


@dataclass(frozen=True)
class Cell:
    name: str
    trigger: str                     # continuous | realtime | microbatch | passthrough
    rate: int                        # events/s
    lever: str = ""                  # the ablated lever ("" = shipped defaults)
    why: str = ""                    # what the cell shows
    query: dict[str, object] = field(default_factory=dict)   # [query] overrides
    spark: dict[str, str] = field(default_factory=dict)      # [spark] overrides
    metrics: dict[str, object] = field(default_factory=dict)  # [metrics] overrides
    cpus: dict[str, object] = field(default_factory=dict)     # [cpus] overrides
    jvm_options: tuple[str, ...] = ()                        # added to the driver JVM
    tmpfs_checkpoint: bool = False   # checkpoint under /dev/shm instead of the disk
    # A live rules swap (``appliance rules reload``) this many seconds after ready.
    reload_at_s: float | None = None
    # A generated rules file of this many rules (bench._rule_sets); 0: the shipped example.
    rules: int = 0
    # Scheduling levers applied from outside (bench._sched): to the appliance JVM's threads
    # by name, and CPUs split between the appliance and the broker + load driver.
    threads: ThreadPolicy | None = None
    affinity: Affinity | None = None
    # Nice values for the appliance's and the broker's processes (a unit's ``Nice=``).
    priority: Priority | None = None


RATE = 10_000


def short_run_interval(trigger: str) -> str:
    """The interval a bench run of seconds to minutes uses for ``trigger``: the mode's
    default, but the shortest batch Spark accepts where the default batch (real-time's 5
    minutes) would not end inside the run (``appliance.trigger`` holds both)."""
    mode = trigger_mode(trigger)
    return mode.min_interval or mode.default_interval

CELLS: tuple[Cell, ...] = (
    Cell("passthrough", "passthrough", RATE, why="JVM consume->produce floor, no Spark"),
    Cell("continuous", "continuous", RATE, why="shipped defaults"),
    Cell("realtime", "realtime", RATE, why="shipped defaults (5-minute batches)"),
    Cell("microbatch", "microbatch", RATE, why="shipped defaults (0 s trigger)"),
    Cell("continuous-50k", "continuous", 50_000, why="shipped defaults at 50,000/s"),
    # -- a live rules swap in the middle of the run (shipped defaults otherwise) ----------
    Cell("continuous-reload", "continuous", RATE, why="rules reloaded live at second 30",
         reload_at_s=30.0),
    Cell("realtime-reload", "realtime", RATE, why="rules reloaded live at second 30",
         reload_at_s=30.0),
    Cell("microbatch-reload", "microbatch", RATE, why="rules reloaded live at second 30",
         reload_at_s=30.0),
    Cell("passthrough-50k", "passthrough", 50_000, why="the floor at 50,000/s"),
    # -- ablations: one lever back to its old value each ---------------------------------
    Cell("continuous-no-warmup", "continuous", RATE, "warm-up",
         "no plan warm-up before ready", query={"warmup": False}),
    Cell("continuous-no-inband", "continuous", RATE, "in-band alert latency",
         "no in-band alert latency observer (its cost in the appliance's process)",
         metrics={"alert_latency": False}),
    Cell("continuous-poll-1ms", "continuous", RATE, "epoch poll 100 ms",
         "executorPollIntervalMs back to 1 ms (1,000 epoch RPCs/s per task)",
         spark={"spark.sql.streaming.continuous.executorPollIntervalMs": "1"}),
    Cell("continuous-flush-commit", "continuous", RATE, "commit waits own acks",
         "sink commit() flushes the shared producer again",
         jvm_options=("-Dappliance.kafka.sink.flushOnCommit=true",)),
    Cell("continuous-filecontext-checkpoint", "continuous", RATE, "checkpoint renames",
         "Spark's default checkpoint manager (FileContext: a `readlink` child process per "
         "renamed path on a local disk)",
         spark={"spark.sql.streaming.checkpointFileManagerClass":
                "org.apache.spark.sql.execution.streaming.checkpointing."
                "FileContextBasedCheckpointFileManager"}),
    Cell("continuous-tmpfs", "continuous", RATE, "checkpoint on tmpfs",
         "checkpoint under /dev/shm (lever ON: the default is the disk)",
         tmpfs_checkpoint=True),
    Cell("continuous-c1-only", "continuous", RATE, "JIT flags",
         "C1 only (-XX:TieredStopAtLevel=1): faster warm-up, slower peak (lever ON)",
         jvm_options=("-XX:TieredStopAtLevel=1",)),
    Cell("continuous-jit-early", "continuous", RATE, "JIT flags",
         "compile thresholds x0.2 (-XX:CompileThresholdScaling=0.2): the warm-up's records "
         "reach C2 sooner (lever ON)",
         jvm_options=("-XX:CompileThresholdScaling=0.2",)),
    Cell("continuous-no-wholestage", "continuous", RATE, "whole-stage code generation",
         "spark.sql.codegen.wholeStage=false: each operator's expressions compiled in "
         "small methods instead of one ~6 KB method per stage (lever ON)",
         spark={"spark.sql.codegen.wholeStage": "false"}),
    Cell("continuous-split-256", "continuous", RATE, "generated method size",
         "spark.sql.codegen.methodSplitThreshold=256 (default 1024 characters): the "
         "stages' expression code split into more, smaller methods, so that each C2 "
         "compilation is shorter (lever ON)",
         spark={"spark.sql.codegen.methodSplitThreshold": "256"}),
    # -- scheduling: who waits for whom on the two cores ---------------------------------
    Cell("continuous-jit-nice", "continuous", RATE, "JIT threads at nice 19",
         "the JIT's compiler threads at nice 19 below the task threads (JVM flags, "
         "appliance.tuning.JIT_BELOW_TASKS; lever ON)", jvm_options=JIT_BELOW_TASKS),
    Cell("realtime-jit-nice", "realtime", RATE, "JIT threads at nice 19",
         "the JIT's compiler threads at nice 19 below the task threads (lever ON)",
         jvm_options=JIT_BELOW_TASKS),
    Cell("continuous-jit-idle", "continuous", RATE, "JIT threads SCHED_IDLE",
         "the JIT's compiler threads SCHED_IDLE: they run only on an otherwise idle core "
         "(set by the bench on the driver JVM's threads; lever ON)",
         threads=ThreadPolicy(JIT_THREADS, idle=True)),
    Cell("continuous-gc-nice", "continuous", RATE, "concurrent GC threads at nice 19",
         "G1's concurrent threads (marking, refinement, service) at nice 19; the "
         "stop-the-world workers unchanged (set by the bench; lever ON)",
         threads=ThreadPolicy(GC_CONCURRENT_THREADS, nice=19)),
    Cell("continuous-affinity", "continuous", RATE, "CPU affinity",
         "the appliance's processes on one core, the broker and the load driver on the "
         "other (lever ON)", affinity=Affinity(appliance_cpus=1)),
    Cell("continuous-affinity-ready", "continuous", RATE, "CPU affinity from ready",
         "the CPU split of continuous-affinity from the ready line on: the start-up and "
         "warm-up keep both cores (lever ON)",
         affinity=Affinity(appliance_cpus=1, from_ready=True)),
    Cell("continuous-affinity-ready-20s", "continuous", RATE,
         "CPU affinity for 20 s from ready",
         "the CPU split from the ready line for 20 s (the JIT's busiest), then both "
         "cores for everyone again (lever ON)",
         affinity=Affinity(appliance_cpus=1, from_ready=True, for_s=20.0)),
    Cell("continuous-cpus-after-ready", "continuous", RATE, "[cpus] after_ready",
         "the product's own form of the split: [cpus] after_ready = the first CPU for the "
         "default 20 s; the broker and the load driver left unpinned (lever ON)",
         cpus={"after_ready": "0"}),
    Cell("realtime-cpus-after-ready", "realtime", RATE, "[cpus] after_ready",
         "[cpus] after_ready = the first CPU for the default 20 s (lever ON)",
         cpus={"after_ready": "0"}),
    Cell("realtime-affinity-ready-20s", "realtime", RATE,
         "CPU affinity for 20 s from ready",
         "the CPU split from the ready line for 20 s, then both cores again (lever ON)",
         affinity=Affinity(appliance_cpus=1, from_ready=True, for_s=20.0)),
    Cell("continuous-appliance-nice", "continuous", RATE, "process priority",
         "the appliance's processes at nice 10, below the broker and the load driver "
         "(lever ON)", priority=Priority(appliance_nice=10)),
    Cell("realtime-appliance-nice", "realtime", RATE, "process priority",
         "the appliance's processes at nice 10, below the broker and the load driver "
         "(lever ON)", priority=Priority(appliance_nice=10)),
    Cell("continuous-broker-nice", "continuous", RATE, "process priority",
         "the broker's threads at nice -10, above the appliance and the load driver "
         "(lever ON; needs root)", priority=Priority(broker_nice=-10)),
    Cell("realtime-sync-progress", "realtime", RATE, "async progress",
         "offset/commit logs written synchronously", query={"async_progress": False}),
    Cell("realtime-5s", "realtime", RATE, "5-minute batches",
         "5-second batches (the old documented setting): a boundary every 5 s",
         query={"interval": "5 seconds"}),
    Cell("realtime-1min", "realtime", RATE, "5-minute batches",
         "1-minute batches: one boundary inside a 60 s cell",
         query={"interval": "1 minute"}),
    Cell("microbatch-sync-progress", "microbatch", RATE, "async progress",
         "offset/commit logs written synchronously", query={"async_progress": False}),
    Cell("microbatch-constraint-propagation", "microbatch", RATE, "constraint propagation off",
         "spark.sql.constraintPropagation.enabled back to true: the optimizer infers every "
         "operator's constraints again on each micro-batch",
         spark={"spark.sql.constraintPropagation.enabled": "true"}),
    Cell("microbatch-stream-warmup", "microbatch", RATE, "streaming warm-up",
         "[query] warmup_batches = 12: the warm-up ends with 12 streaming micro-batches, "
         "so the first real ones do not plan in a cold planner (lever ON)",
         query={"warmup_batches": 12}),
    Cell("microbatch-c1-only", "microbatch", RATE, "JIT flags",
         "C1 only (-XX:TieredStopAtLevel=1): a micro-batch's time is planning, a cold "
         "planner's code compiled sooner and cheaper by C1 (lever ON)",
         jvm_options=("-XX:TieredStopAtLevel=1",)),
    Cell("microbatch-tmpfs", "microbatch", RATE, "checkpoint on tmpfs",
         "checkpoint under /dev/shm (lever ON)", tmpfs_checkpoint=True),
)

BY_NAME = {c.name: c for c in CELLS}
