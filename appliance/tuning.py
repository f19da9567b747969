"""THE one place for Spark tuning: Spark confs, JVM options and Kafka client settings.

Plain data so that local runs (``session.py``) use it today and the Ansible templates can
render the same values for a cluster (``python -m appliance.tuning`` prints it as JSON).
Every value is here for latency: a millisecond appliance cannot afford a 200 ms default
poll interval, a GC pause, a UI thread or a shuffle.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass, field

from appliance.trigger import DEFAULT, TriggerMode, trigger_mode

# G1 with a small pause goal: the continuous reader thread must not stall for long GCs.
GC_OPTIONS = (
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:+ParallelRefProcEnabled",
)


# The JIT's compiler threads at nice 19, below the task threads. On two cores the C2
# compilations after ``ready`` (0.7-7.8 s each, docs/bench/appliance-latency.md) are
# queueing delay for the tasks; at nice 19 a compilation waits while a task thread wants
# the core, and still runs on an idle one. HotSpot sets a thread's priority only under
# ThreadPriorityPolicy=1, and then maps EVERY Java priority to a nice value (up to -5 for
# the highest, honoured for root only): the mapping is pinned to 0 for all ten, so every
# other thread (GC, VM thread, tasks) stays where it was, as root or not. A non-root JVM
# still prints one warning at start ("-XX:ThreadPriorityPolicy=1 may require system level
# permission"): lowering its own threads' priority needs none. HotSpot has no flag for the
# GC's threads alone.
JIT_BELOW_TASKS = (
    "-XX:ThreadPriorityPolicy=1",
    "-XX:CompilerThreadPriority=19",
    *(f"-XX:JavaPriority{priority}_To_OSPriority=0" for priority in range(1, 11)),
)

# Every JVM the appliance starts (driver, executors, the standalone daemons).
JVM_OPTIONS = GC_OPTIONS


# Spark's metric names start with this namespace instead of the application id (which
# changes every run), so dashboards and alert rules can name them.
SPARK_METRICS_NAMESPACE = "appliance"
# Micro-batch: how often an idle query still reports progress (Spark's default is 10 s).
# The metrics use it as the longest a healthy idle query goes without progress.
IDLE_PROGRESS_INTERVAL_MS = 1000
_PROMETHEUS_SERVLET = "org.apache.spark.metrics.sink.PrometheusServlet"


def spark_metrics_conf() -> dict[str, str]:
    """Spark's own Prometheus endpoints, for the driver and the standalone daemons.

    Master and workers always serve them on their web UI (``/metrics/master/prometheus``,
    ``/metrics/applications/prometheus``, ``/metrics/prometheus``). The driver serves its
    own (``/metrics/prometheus``, streaming query metrics included) and its executors'
    (``/metrics/executors/prometheus``) only with ``spark.ui.enabled=true``, which the
    appliance leaves off by default (no UI listener on the driver); an operator who wants
    the driver/executor panels sets it in ``[spark]``.
    """
    return {
        "spark.metrics.namespace": SPARK_METRICS_NAMESPACE,
        "spark.metrics.conf.*.sink.prometheusServlet.class": _PROMETHEUS_SERVLET,
        "spark.metrics.conf.*.sink.prometheusServlet.path": "/metrics/prometheus",
        "spark.metrics.conf.master.sink.prometheusServlet.path": "/metrics/master/prometheus",
        "spark.metrics.conf.applications.sink.prometheusServlet.path":
            "/metrics/applications/prometheus",
        "spark.metrics.conf.*.source.jvm.class": "org.apache.spark.metrics.source.JvmSource",
        "spark.metrics.staticSources.enabled": "true",
        "spark.ui.prometheus.enabled": "true",
        "spark.executor.metrics.pollingInterval": "0",  # heap/GC at heartbeats, no poller
    }


@dataclass(frozen=True)
class Tuning:
    """Spark confs and JVM options for one trigger mode (see ``tuning_for``)."""

    # The mode itself (default interval, output mode, ...): the deploy takes its
    # per-trigger defaults from here too.
    trigger: TriggerMode = DEFAULT
    spark_conf: dict[str, str] = field(default_factory=dict)
    jvm_options: tuple[str, ...] = JVM_OPTIONS
    # Options of the Kafka source (reader / receiver) and sink (producer).
    source_options: dict[str, str] = field(default_factory=dict)
    sink_options: dict[str, str] = field(default_factory=dict)
    # Options of the streaming query itself (``writeStream.option``), e.g. async progress.
    query_options: dict[str, str] = field(default_factory=dict)
    # spark-defaults for the standalone master and workers (their metrics endpoints).
    daemon_conf: dict[str, str] = field(default_factory=spark_metrics_conf)

    def as_dict(self) -> dict:
        out = asdict(self)
        out["trigger"] = self.trigger.as_dict()
        return out


def _spark_conf(jvm: str) -> dict[str, str]:
    return {
        "spark.ui.enabled": "false",               # no UI thread, no port to collide on
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "2",        # the plan has no shuffle; keep it small
        # A rule that divides by zero or casts a bad string must give null for one event,
        # not kill the whole stream (Spark 4 turns ANSI mode on by default).
        "spark.sql.ansi.enabled": "false",
        "spark.sql.streaming.metricsEnabled": "true",
        # Continuous mode: how often each task asks the driver's epoch coordinator whether
        # the epoch advanced (an RPC; NOT the record path: records flow through the queue
        # below whatever this is). At 1 ms that was ~1,000 RPCs/s per task competing for 2
        # cores; 100 ms (Spark's default) only delays noticing an epoch end, i.e. a commit.
        "spark.sql.streaming.continuous.executorPollIntervalMs": "100",
        # The queue between the Kafka reader thread and the task (records, not bytes).
        "spark.sql.streaming.continuous.executorQueueSize": "4096",
        "spark.sql.streaming.continuous.epochBacklogQueueSize": "10000",
        # Micro-batch: poll for new data quickly when idle.
        "spark.sql.streaming.pollingDelay": "1ms",
        "spark.sql.streaming.noDataProgressEventInterval": str(IDLE_PROGRESS_INTERVAL_MS),
        "spark.sql.streaming.minBatchesToRetain": "20",
        "spark.locality.wait": "0s",                # schedule at once, never wait for locality
        # The optimizer runs on every micro-batch (and on every query start and rules swap).
        # Constraint propagation infers each operator's constraints to add or prune filters
        # (for joins, mostly); over the pipeline's wide projections it was the costliest rule
        # that never changed the plan (PruneFilters: 3.5-10 ms of a batch's ~50-115 ms of
        # rules, RuleExecutor metrics under load). A map-only plan has one filter and no
        # join, so nothing it could infer applies.
        "spark.sql.constraintPropagation.enabled": "false",
        # A dead letter's raw bytes that are not UTF-8 go out as base64 (the dead-letter
        # format). Spark's base64() writes MIME base64 by default, a CRLF after every 76
        # characters, which strict decoders (Java's Base64.getDecoder(), Go's StdEncoding,
        # Python's validate=True) refuse; the format means plain RFC 4648 base64.
        "spark.sql.chunkBase64String.enabled": "false",
        "spark.driver.extraJavaOptions": jvm,
        "spark.executor.extraJavaOptions": jvm,
        "spark.serializer": "org.apache.spark.serializer.KryoSerializer",
        **spark_metrics_conf(),
    }


# Spark writes each checkpoint entry (two per continuous epoch, i.e. per second; two per
# micro-batch) to a temp file and renames it into place. Its default manager renames
# through Hadoop's FileContext, whose local file system asks for the link status of each
# path by running `readlink` in a child process (no native Hadoop library here): a
# jstack showed the driver's RPC dispatcher in forkAndExec, and an idle continuous query
# made ~40 processes a second, 1.0 s of child CPU per 20 s plus ~0.5 s of the JVM's own.
# The FileSystem-based manager renames with the plain file rename, atomic on a local
# disk, and makes none (0.2 s of child CPU per 20 s left). Only for a LOCAL checkpoint
# directory (appliance.process.session): on an object store a rename is not atomic at all, and
# Spark's default is the careful choice there.
LOCAL_CHECKPOINT_CONF = {
    "spark.sql.streaming.checkpointFileManagerClass":
        "org.apache.spark.sql.execution.streaming.checkpointing."
        "FileSystemBasedCheckpointFileManager",
}


# Async progress tracking: the offset and commit logs are written by a background thread
# instead of between batches, so a micro-batch (and a real-time batch boundary) no longer
# waits for two checkpoint-file writes. Spark enables it only for sinks it knows by name;
# the override option (the one Spark's own tests use) vouches for ours, which is safe here
# because the sink is at-least-once and idempotent per alert_id. The checkpoint interval
# is 0 (every batch's progress is written, off the batch path): with Spark's default of
# 1 s the commit of a batch that ran within 1 s of the previous commit is skipped, and
# when no later batch comes (a quiet stream) it is never written, so the committed
# offsets stay behind for good: consumer lag never reaches 0 and a restart replays the
# tail. Real-time mode refuses any other value anyway. The writer options win over
# appliance.connector's REAL_TIME_SINK_CONF (which keeps real-time mode's by-default
# async tracking off for sinks that did not ask for it).
ASYNC_PROGRESS = {
    "asyncProgressTrackingEnabled": "true",
    "asyncProgressTrackingCheckpointIntervalMs": "0",
    "_asyncProgressTrackingOverrideSinkSupportCheck": "true",
}


def tuning_for(mode: TriggerMode, async_progress: bool = True) -> Tuning:
    """Tuning for the trigger ``mode``; ``async_progress`` as above, where the mode has
    it (``TriggerMode.async_progress``)."""
    jvm = " ".join(JVM_OPTIONS)
    source = {
        # Backpressure: cap each micro-batch so a backlog is drained in bounded steps.
        "maxOffsetsPerTrigger": "200000",
        "failOnDataLoss": "false",
        # Receiver: return from a fetch as soon as one byte is there, wait at most 5 ms.
        "kafka.fetch.min.bytes": "1",
        "kafka.fetch.max.wait.ms": "5",
        "kafka.max.poll.records": "2000",
        "kafka.receive.buffer.bytes": "1048576",
    }
    if not mode.admission_limits:
        source.pop("maxOffsetsPerTrigger")  # only where per-trigger limits apply
    sink = {
        "kafka.linger.ms": "0",                     # send alerts at once, do not batch
        "kafka.acks": "all",                        # at-least-once needs acknowledged writes
        "kafka.enable.idempotence": "false",
        "kafka.max.in.flight.requests.per.connection": "5",
        "kafka.compression.type": "none",
    }
    conf = _spark_conf(jvm)
    if not mode.task_retries:
        # A mode that cannot retry a task: Spark's default 4 attempts would only delay the
        # query's failure by seconds. Fail at the first one; the appliance restarts the
        # query in place or exits for its supervisor (TriggerMode.task_retries).
        conf["spark.task.maxFailures"] = "1"
    query = dict(ASYNC_PROGRESS) if async_progress and mode.async_progress else {}
    return Tuning(trigger=mode, spark_conf=conf, source_options=source, sink_options=sink,
                  query_options=query)


def main(argv: list[str] | None = None) -> int:
    """Print the tuning for a trigger as JSON (what Ansible templates consume)."""
    args = sys.argv[1:] if argv is None else argv
    try:
        mode = trigger_mode(args[0]) if args else DEFAULT
    except ValueError as exc:
        print(f"appliance.tuning: trigger: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(tuning_for(mode).as_dict(), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())


def sql_settings(conf: dict[str, str]) -> dict[str, str]:
    """The session-level SQL settings among ``conf`` (``spark.sql.*``: ANSI off, ...): what
    a child session, or a check's own Spark, must share with the appliance's query."""
    return {key: value for key, value in conf.items() if key.startswith("spark.sql.")}
