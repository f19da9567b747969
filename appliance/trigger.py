"""The three trigger modes, and everything that differs between them, in one place.

Continuous, real-time and micro-batch run the same transformation but differ in how Spark
schedules it, and that difference reaches config defaults, tuning, the query's start, what
``ready`` means, health checks and how new rules reach the running query. Each
difference is a field of ``TriggerMode`` with the reason next to it, so the rest of the
code asks the mode (``mode.slot_per_partition``) instead of comparing its name, and a
fourth mode would be one more table row. The Ansible deploy reads the same table through
``python -m appliance.tuning`` (``Tuning.trigger``).

Pure Python importing only the leaf ``appliance.durations``: config validation, tuning
and the CLI read it before any JVM starts.
"""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass
from typing import Protocol

from appliance.durations import parse_ms


def interval_ms(text: str) -> float:
    """``"1 second"`` -> 1000.0, ``"20s"`` -> 20000.0: any duration ``appliance.durations``
    reads (a bare number is seconds); ValueError naming the accepted forms otherwise."""
    return parse_ms(text)


class ReadySignal(enum.Enum):
    """What proves the query processes events as they come (``appliance.ready``, and the
    end of a rules swap's gap)."""

    # Spark's epoch coordinator commits an epoch only once every writer partition has
    # committed it: a task per partition runs and the write path completed once. Epochs
    # commit with or without data.
    EPOCH_COMMITTED = "an epoch committed in this run"
    # A batch commits only at its end, minutes away; the task scheduler counts the
    # long-running tasks as it launches them (the listener bus lagged seconds behind).
    TASKS_LAUNCHED = "a task per input partition launched"
    # No-data triggers report progress too; nothing commits before data arrives.
    TRIGGER_COMPLETED = "a trigger completed in this run"


class RulesSwitch(enum.Enum):
    """How a new rules version reaches the running query's tasks (the rule book,
    ``appliance.rules.rule_book``): no task stops either way."""

    # Epochs and micro-batches start every interval or sooner: the first one no task has
    # entered runs the new rules, in every task (one version per epoch or batch).
    NEXT_GENERATION = "from the next epoch or batch a task enters"
    # A real-time batch lasts minutes: each task takes the new version at its next record
    # (a partition switches at one record; each alert names the version that raised it).
    LIVE = "at each task's next record"


class ProcessedFrom(enum.Enum):
    """Where the offsets a query has processed (every alert for the events below them
    acknowledged by Kafka) are read."""

    # Each epoch, or each short batch, commits within an interval.
    CHECKPOINT = "the checkpoint's newest committed epoch or batch"
    # A real-time batch commits only at its end, minutes away; within it the connector's
    # readers mark how far their task's alerts were acknowledged (``ProgressMarks`` in the
    # connector), merged with what the checkpoint committed.
    CHECKPOINT_AND_MARKS = "the checkpoint, and the running batch's durable marks"


class StopAt(enum.Enum):
    """Where a stopping query (SIGTERM, ``appliance stop``) leaves its work: a query
    started again on its checkpoint re-runs its last uncommitted epoch or batch from that
    one's start offsets."""

    # Epochs commit every interval and micro-batches within one: a stop anywhere replays
    # at most an interval of events.
    ANYWHERE = "where it is: the last epoch or batch committed within an interval"
    # A real-time batch commits at its end, minutes away: stopped mid-batch, the next run
    # replayed minutes of events before its first new alert. The source is asked to end
    # the running batch (``BatchEnd`` in the connector), Spark commits it, then the query
    # stops (``appliance.process.query_stop``).
    BATCH_END = "at its running batch's end, asked for and committed first"


class QueryProbe(Protocol):
    """What ``TriggerMode.is_processing`` may ask of a started query
    (``appliance.process.query_probes`` answers)."""

    def epochs_committed(self) -> int:
        """Epochs or batches committed since this query started."""
        ...

    def tasks_launched(self) -> int:
        """Tasks the scheduler launched and has not seen end."""
        ...

    def progress_reported(self) -> bool:
        """Whether the query reported progress (a trigger completed)."""
        ...


@dataclass(frozen=True)
class TriggerMode:
    """One trigger mode's behaviour; the instances below are the whole table."""

    name: str
    # Spark's keyword for ``DataStreamWriter.trigger(**{keyword: interval})``.
    spark_keyword: str
    # The interval when the config names none (bench-measured: docs/bench/appliance-latency.md).
    default_interval: str
    # The shortest interval Spark accepts, and the Spark conf that can lower it.
    min_interval: str | None
    min_interval_conf: str | None
    # Real-time mode refuses ``append``; for a stateless map-only query ``update`` emits
    # exactly the same rows.
    output_mode: str
    # Long-running tasks hold one task slot per input partition for the query's life; with
    # fewer slots the query never fails, it hangs.
    slot_per_partition: bool
    # Continuous mode cannot retry a task ("Continuous execution does not support task
    # retry"): Spark's default 4 attempts only delay the query's failure, so fail at the
    # first (the appliance restarts the query in place or exits for its supervisor).
    task_retries: bool
    # Offset and commit logs written in the background ([query] async_progress); continuous
    # mode has no such option.
    async_progress: bool
    # Per-trigger admission limits (``maxOffsetsPerTrigger``) apply: only micro-batches.
    admission_limits: bool
    # Epochs commit every interval with or without data, so a silent commit log means the
    # query is stuck (appliance.query.epoch_watch): continuous only.
    commits_every_interval: bool
    # Where the query's processed offsets come from (``QueryProbes.processed``): what a
    # pair's active commits to Kafka once a second (where its partner starts after a
    # crash: the replay), and what tells a newly active instance it has caught up
    # (``appliance.process.pair_turns``: it says it serves only then, and its partner's
    # query runs until that). Either way they follow the processing within a second or so.
    processed_from: ProcessedFrom
    # Spark's per-trigger progress reports (``lastProgress``) exist; continuous has none.
    reports_progress: bool
    # An idle query still reports (no-data) progress, every
    # ``spark.sql.streaming.noDataProgressEventInterval``: micro-batch only.
    reports_idle_progress: bool
    # Every trigger plans its batch again (analysis, optimizer rules, physical planning,
    # the stage's Java source): micro-batch only. Its warm-up can end with streaming
    # micro-batches, so that planning is compiled before ``ready`` ([query]
    # warmup_batches, appliance.query.warmup.StreamWarmup).
    plans_every_batch: bool
    ready: ReadySignal
    rules_switch: RulesSwitch
    stop_at: StopAt

    def trigger_kwargs(self, interval: str) -> dict[str, str]:
        """Keyword arguments of ``DataStreamWriter.trigger`` for ``interval``."""
        return {self.spark_keyword: interval}

    def interval_problem(self, interval: str, spark_conf: dict[str, str]) -> str | None:
        """Why Spark would refuse ``interval`` for this mode (None if it is fine)."""
        if self.min_interval is None or self.min_interval_conf is None:
            return None
        minimum = spark_conf.get(self.min_interval_conf, self.min_interval)
        try:  # a Spark time conf: a bare number is milliseconds
            minimum_ms = parse_ms(minimum, bare_unit="ms")
        except ValueError:
            minimum_ms = interval_ms(self.min_interval)
        if interval_ms(interval) < minimum_ms:
            return (f"the {self.name} trigger needs at least {minimum} "
                    f"({self.min_interval_conf}) (got {interval!r})")
        return None

    def progress_interval_s(self, interval: str, idle_progress_ms: float) -> float:
        """How often the healthy query commits or reports progress: its interval; an idle
        micro-batch query reports every ``idle_progress_ms`` (a 0 s trigger means as often
        as that)."""
        every = interval_ms(interval)
        if self.reports_idle_progress:
            every = max(every, idle_progress_ms)
        return every / 1000.0

    def eager_trigger_kwargs(self) -> dict[str, str]:
        """``trigger_kwargs`` with no waiting between triggers (the warm-up's)."""
        return {self.spark_keyword: "0 seconds"}

    def switch_wait_s(self, interval: str) -> float:
        """How long a rules reload waits to see the new version in effect before it
        answers (it takes effect anyway): a couple of epochs or batches where they pass
        every interval, a moment where tasks switch live. An idle query runs nothing, so the
        new rules wait, pending, for its first record."""
        if self.rules_switch is RulesSwitch.LIVE:
            return 2.0
        return 2 * interval_ms(interval) / 1000.0 + 2.0

    def is_processing(self, probe: QueryProbe, partitions: int) -> bool:
        """Whether the started query processes events as they come (see ``ReadySignal``)."""
        if self.ready is ReadySignal.EPOCH_COMMITTED:
            return probe.epochs_committed() > 0
        if self.ready is ReadySignal.TASKS_LAUNCHED:
            return probe.tasks_launched() >= max(partitions, 1)
        return probe.progress_reported()

    def as_dict(self) -> dict[str, object]:
        """JSON-ready (enums by value), for ``python -m appliance.tuning``."""
        return {k: (v.name.lower() if isinstance(v, enum.Enum) else v)
                for k, v in asdict(self).items()}


CONTINUOUS = TriggerMode(
    name="continuous",
    spark_keyword="continuous",
    default_interval="1 second",
    min_interval=None,
    min_interval_conf=None,
    output_mode="append",
    slot_per_partition=True,
    task_retries=False,
    async_progress=False,
    admission_limits=False,
    commits_every_interval=True,
    processed_from=ProcessedFrom.CHECKPOINT,
    reports_progress=False,
    reports_idle_progress=False,
    plans_every_batch=False,
    ready=ReadySignal.EPOCH_COMMITTED,
    rules_switch=RulesSwitch.NEXT_GENERATION,
    stop_at=StopAt.ANYWHERE,
)
# Every batch boundary stalls the long-running tasks (offset/commit log writes, planning),
# so batches are long; the price is replay: after a crash the same query restarted re-reads
# the unfinished batch from its start offsets, so up to one interval of events yields
# duplicate alerts (never lost ones); a pair's standby starts from the durable marks
# instead (ProcessedFrom.CHECKPOINT_AND_MARKS), about a second behind, and a stop ends the
# batch before the query (StopAt.BATCH_END), so a restart replays nothing of it. New rules
# do not wait for the batch's end: tasks switch live (RulesSwitch.LIVE).
REALTIME = TriggerMode(
    name="realtime",
    spark_keyword="realTime",
    default_interval="5 minutes",
    min_interval="5 seconds",
    min_interval_conf="spark.sql.streaming.realTimeMode.minBatchDuration",
    output_mode="update",
    slot_per_partition=True,
    task_retries=True,
    async_progress=True,
    admission_limits=False,
    commits_every_interval=False,
    processed_from=ProcessedFrom.CHECKPOINT_AND_MARKS,
    reports_progress=True,
    reports_idle_progress=False,
    plans_every_batch=False,
    ready=ReadySignal.TASKS_LAUNCHED,
    rules_switch=RulesSwitch.LIVE,
    stop_at=StopAt.BATCH_END,
)
# A 0 s interval starts the next batch as soon as the last one ends (a fixed interval only
# adds waiting).
MICROBATCH = TriggerMode(
    name="microbatch",
    spark_keyword="processingTime",
    default_interval="0 seconds",
    min_interval=None,
    min_interval_conf=None,
    output_mode="append",
    slot_per_partition=False,
    task_retries=True,
    async_progress=True,
    admission_limits=True,
    commits_every_interval=False,
    processed_from=ProcessedFrom.CHECKPOINT,
    reports_progress=True,
    reports_idle_progress=True,
    plans_every_batch=True,
    ready=ReadySignal.TRIGGER_COMPLETED,
    rules_switch=RulesSwitch.NEXT_GENERATION,
    stop_at=StopAt.ANYWHERE,
)

MODES: dict[str, TriggerMode] = {m.name: m for m in (CONTINUOUS, REALTIME, MICROBATCH)}
TRIGGERS: tuple[str, ...] = tuple(MODES)
DEFAULT = CONTINUOUS


def trigger_mode(name: str) -> TriggerMode:
    """The mode called ``name``; ValueError naming the choices otherwise."""
    try:
        return MODES[name]
    except KeyError:
        raise ValueError(f"must be one of {', '.join(TRIGGERS)} (got {name!r})") from None
