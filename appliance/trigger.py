"""The three trigger modes, and everything that differs between them, in one place.

Continuous, real-time and micro-batch run the same transformation but differ in how Spark
schedules it, and that difference reaches config defaults, tuning, the query's start, what
``ready`` means, health checks and how a running query is stopped for a rules swap. Each
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


class BoundaryStop(enum.Enum):
    """How a running query is brought to a committed boundary before it is stopped for a
    rules swap, so its successor on the same checkpoint replays as little as possible."""

    # Epochs commit every interval: wait for the next commit, then stop at once.
    NEXT_COMMIT = "the next committed epoch or batch"
    # A batch lasts minutes: ask the source to end the running batch now (the connector's
    # batch-end signal), wait for its commit, then stop.
    END_BATCH = "the running batch, ended early by the source"


#: How long a swap waits for a batch to end and commit before it stops the query anyway.
BATCH_BOUNDARY_WAIT_S = 30.0


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
    boundary: BoundaryStop

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

    def boundary_wait_s(self, interval: str) -> float:
        """How long a rules swap waits for the old query's boundary (``boundary``) before it
        stops the query anyway: nothing is lost then, the successor replays more. A few
        epochs where they commit every interval; else one batch's end and commit."""
        if self.commits_every_interval:
            return 3 * interval_ms(interval) / 1000.0 + 2.0
        return BATCH_BOUNDARY_WAIT_S

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
    reports_progress=False,
    reports_idle_progress=False,
    plans_every_batch=False,
    ready=ReadySignal.EPOCH_COMMITTED,
    boundary=BoundaryStop.NEXT_COMMIT,
)
# Every batch boundary stalls the long-running tasks (offset/commit log writes, planning),
# so batches are long; the price is replay: after a crash the unfinished batch is re-read
# from its start offsets, so up to one interval of events yields duplicate alerts (never
# lost ones). A rules swap does not pay it: it ends the batch first (BoundaryStop.END_BATCH).
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
    reports_progress=True,
    reports_idle_progress=False,
    plans_every_batch=False,
    ready=ReadySignal.TASKS_LAUNCHED,
    boundary=BoundaryStop.END_BATCH,
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
    reports_progress=True,
    reports_idle_progress=True,
    plans_every_batch=True,
    ready=ReadySignal.TRIGGER_COMPLETED,
    boundary=BoundaryStop.NEXT_COMMIT,
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
