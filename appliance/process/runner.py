"""The appliance's lifecycle: check everything, start the query, serve, stop cleanly.

Order matters: everything that can be checked without a JVM (config, rules, topics,
task slots for a local master) is checked before Spark starts, so a typo costs a second,
not a JVM start. ``Appliance`` is used in-process by ``demo`` and the benchmark;
``run`` adds signal handling and exit codes for ``appliance run``.

The modules that pull in pyspark or prometheus_client (session, warmup, pipeline, metrics,
alert_latency) are imported by the methods that start those parts, not above: there is no
import cycle, but ``appliance --help`` imports this module through the ``demo`` plugin, and
a config or rules error should exit 2 without first waiting for pyspark to import.
"""

from __future__ import annotations

import os
import re
import signal
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

from appliance import logs
from appliance.config import Config, ConfigError, QueryConfig, interval_ms
from appliance.process.class_archive import resolve as resolve_class_archive
from appliance.process.embedded_kafka import EmbeddedPortInUse, start_embedded
from appliance.process.restarts import RestartBudget, in_place_cause
from appliance.process.slots import wait_for_slots
from appliance.query.checkpoint import batch_ids
from appliance.query.checkpoint import repair as repair_checkpoint
from appliance.query.epoch_watch import EpochWatch
from appliance.query.rules import Rule, RulesError, analyze_rules, load_rules
from appliance.topics import (
    TopicError,
    client_config,
    default_partitions,
    ensure_topics,
    partition_counts,
)
from appliance.tuning import IDLE_PROGRESS_INTERVAL_MS, tuning_for

SLOT_TRIGGERS = ("continuous", "realtime")  # one long-running task per input partition
# How long ``start()`` waits for the query to really run before it gives up (exit 1): a
# bound, not an expectation (a fresh query runs within seconds; a machine shared with much
# other work has been seen to need minutes).
READY_TIMEOUT_S = 600.0
PROGRESS_LOG_S = 10.0


class PreflightError(Exception):
    """The query could not run as configured (one line, exit 2)."""


log = logs.get_logger("appliance")


def local_slots(master: str) -> int | None:
    """Task slots of a ``local[...]`` master; None for a cluster master."""
    if master == "local":
        return 1
    match = re.match(r"^local\[(\d+|\*)(?:,\d+)?\]$", master)
    if not match:
        return None
    return os.cpu_count() or 1 if match.group(1) == "*" else int(match.group(1))


def check_slots(trigger: str, partitions: int, slots: int, where: str,
                fix: str | None = None) -> None:
    """Continuous and real-time queries hang (never fail) without a slot per partition."""
    if trigger in SLOT_TRIGGERS and slots < partitions:
        fix = fix or f'e.g. spark.master = "local[{partitions}]"'
        raise PreflightError(
            f"query.trigger={trigger} needs one task slot per input partition: the events "
            f"topic has {partitions} partitions but {where} gives {slots} slots; "
            f"use at least {partitions} ({fix})")


def check_cluster_slots(spark, trigger: str, partitions: int) -> None:
    """On a cluster: wait (bounded) for this application's executors, then check slots."""
    if trigger not in SLOT_TRIGGERS:
        return
    sc = spark.sparkContext
    slots, waited = wait_for_slots(sc, partitions)
    log.info("spark.executors", slots=slots, needed=partitions, waited_s=round(waited, 1))
    check_slots(trigger, partitions, slots,
                f"{sc.master} (cores granted to this application)",
                fix="more workers or cores, a higher spark.cores.max, or fewer partitions")


def trigger_kwargs(config: Config) -> dict[str, str]:
    interval = config.query.interval
    return {"continuous": {"continuous": interval}, "realtime": {"realTime": interval},
            "microbatch": {"processingTime": interval}}[config.query.trigger]


def progress_interval_s(query: QueryConfig) -> float:
    """How often the healthy query commits or reports progress: its interval, but an idle
    micro-batch query reports only every ``IDLE_PROGRESS_INTERVAL_MS`` (a 0 s trigger
    means as often as that)."""
    interval = interval_ms(query.interval)
    if query.trigger == "microbatch":
        interval = max(interval, IDLE_PROGRESS_INTERVAL_MS)
    return interval / 1000.0


def output_mode(trigger: str) -> str:
    """Real-time mode refuses ``append``; for a stateless map-only query ``update`` emits
    exactly the same rows."""
    return "update" if trigger == "realtime" else "append"


class Appliance:
    """One broker (embedded or external), one SparkSession, one streaming query."""

    def __init__(self, config: Config, spark=None):
        """``spark``: an existing session to run in (tests, demo); it is not stopped."""
        self.config = config
        self._own_spark = spark is None
        self.rules: list[Rule] = []
        self.broker = None
        self.bootstrap: str | None = config.kafka.bootstrap_servers
        self.spark = spark
        self.query = None
        self.metrics_port: int | None = None
        self._metrics_server = None
        self._poller = None
        self._observer = None
        self._processing = False
        self.recovered = False  # the query resumed from an existing checkpoint
        self._partitions = 0
        self._next_progress_log = 0.0
        self._commits_at_start: set[str] = set()
        self.warmup = None  # appliance.query.warmup.WarmupResult once warmed
        self._classes_before_query = 0  # see query_new_classes
        self._collector = None  # appliance.observability.metrics.ApplianceCollector once serving
        self._restarts = RestartBudget(config.query.executor_loss_restarts)
        self._failed_at: float | None = None  # monotonic time of the failure being restarted

    # -- checks that need no JVM -------------------------------------------------------
    def load_rules(self) -> list[Rule]:
        self.rules = load_rules(self.config.rules.path)
        return self.rules

    def start_kafka(self) -> dict[str, int]:
        """Start the embedded broker if none is configured; make sure topics exist."""
        if self.bootstrap is None:
            output = logs.output()  # on a terminal, the broker's lines join the log file
            self.broker = start_embedded(self.config.kafka, output.file if output else None)
            self.bootstrap = self.broker.bootstrap
            log.info("broker.embedded", bootstrap=self.bootstrap)
        counts = ensure_topics(self.client_config(), default_partitions(self.config.topics),
                               create=self.broker is not None)
        log.info("topics.ready", partitions=counts)
        return counts

    def warmup_topic(self) -> str | None:
        """The warm-up topic if usable: created on the embedded broker; on an external
        cluster only if it exists (creating topics there is the operator's call)."""
        if not self.config.query.warmup:
            return None
        name = self.config.topics.warmup
        if self.broker is not None:
            ensure_topics(self.client_config(), {name: 2}, create=True)
            return name
        try:
            return name if partition_counts(self.client_config(), [name])[name] else None
        except Exception:  # noqa: BLE001 - no warm-up topic only means a plan-only warm-up
            return None

    def client_config(self) -> dict:
        return client_config(self.config.kafka, self.bootstrap)

    # -- Spark -------------------------------------------------------------------------
    def start_spark(self) -> None:
        from appliance.process.session import build_session, spark_conf

        archive = None
        if self.spark is None:
            archive = resolve_class_archive(self.config.spark.class_archive)
            self.spark = build_session(self.config, class_archive=archive)
        else:
            # A shared session (tests, bench): run in a child session so the appliance's
            # SQL settings (e.g. ANSI off) apply to its query and nobody else's.
            self.spark = self.spark.newSession()
            for key, value in spark_conf(self.config).items():
                if key.startswith("spark.sql."):
                    try:
                        self.spark.conf.set(key, value)
                    except Exception:  # static confs only apply to a new SparkContext
                        pass
        log.info("spark.ready", master=self.spark.sparkContext.master,
                 version=self.spark.version, app_id=self.spark.sparkContext.applicationId,
                 class_archive=str(archive) if archive else None)

    def connector_options(self) -> tuple[dict[str, str], dict[str, str]]:
        """The source's and the sink's connector options (bootstrap, tuning, pass-through):
        one definition for the query and its warm-up, so both share the cached producer."""
        cfg = self.config
        tuning = tuning_for(cfg.query.trigger, cfg.query.async_progress)
        # Java spelling of the [kafka] settings (client_security): credentials given as
        # sasl.username/sasl.password become sasl.jaas.config, a PEM CA a truststore.
        passthrough = {f"kafka.{k}": v for k, v in cfg.kafka.java_properties.items()}
        bootstrap = {"kafka.bootstrap.servers": self.bootstrap}
        # [source]/[sink] (an operator's or the deploy's reader/writer settings) override
        # the tuning; [kafka] client properties apply to both.
        return ({**bootstrap, **tuning.source_options, **cfg.source.options, **passthrough},
                {**bootstrap, **tuning.sink_options, **cfg.sink.options, **passthrough})

    def warm_up(self) -> None:
        """Run the query's plan on synthetic records (appliance.query.warmup) before ``ready``."""
        from appliance.query.warmup import warm_up

        source, sink = self.connector_options()
        self.warmup = warm_up(self.spark, self.rules, self.warmup_topic(),
                              self.client_config(), source, sink,
                              latency_headers=self.config.metrics.alert_latency)

    def start_query(self) -> None:
        from appliance.query.pipeline import transform

        cfg = self.config
        tuning = tuning_for(cfg.query.trigger, cfg.query.async_progress)
        source, sink = self.connector_options()
        records = (self.spark.readStream.format("appliance-kafka")
                   .option("subscribe", cfg.topics.events)
                   .option("startingOffsets", cfg.query.starting_offsets)
                   .options(**source).load())
        output = transform(records, self.rules, cfg.topics,
                           latency_headers=cfg.metrics.alert_latency)
        self.repair_checkpoint()
        Path(cfg.query.checkpoint_dir).mkdir(parents=True, exist_ok=True)
        self._commits_at_start = self._commits()
        self.recovered = bool(self._commits_at_start)
        self.query = (output.writeStream.format("appliance-kafka")
                      .queryName("appliance")
                      .option("checkpointLocation", cfg.query.checkpoint_dir)
                      .options(**sink).options(**tuning.query_options)
                      .outputMode(output_mode(cfg.query.trigger))
                      .trigger(**trigger_kwargs(cfg)).start())
        log.info("query.started", id=str(self.query.id), trigger=cfg.query.trigger,
                 interval=cfg.query.interval, checkpoint=cfg.query.checkpoint_dir)

    def repair_checkpoint(self) -> None:
        """Move aside what a crash left in the checkpoint (see ``appliance.query.checkpoint``)."""
        for fix in repair_checkpoint(self.config.query.checkpoint_dir):
            log.warning("checkpoint.repaired", path=fix.path, moved_to=fix.moved_to,
                        reason=fix.reason)

    def start_metrics(self) -> None:
        from appliance.observability.alert_latency import AlertObserver, LatencyHistogram
        from appliance.observability.metrics import ApplianceCollector, MetricsPoller, serve

        query = self.config.query
        collector = self._collector = ApplianceCollector(
            query.trigger, len(self.rules), recovered=self.recovered,
            progress_interval_s=progress_interval_s(query))
        self._poller = MetricsPoller(collector, self.client_config(), self.config.topics,
                                     self.config.query.checkpoint_dir, self.query_active,
                                     last_progress=self.last_progress_time)
        self._poller.start()
        extra = []
        if self.config.metrics.alert_latency:
            histogram = LatencyHistogram()
            self._observer = AlertObserver(histogram, self.client_config(),
                                           self.config.topics.alerts)
            self._observer.start()
            extra.extend((histogram, self._observer))
        self._metrics_server, self.metrics_port = serve(
            collector, self.config.metrics.host, self.config.metrics.port, *extra)

    def last_progress_time(self) -> float | None:
        """Unix time of the query's last progress report (None in continuous mode)."""
        try:
            progress = self.query.lastProgress if self.query is not None else None
        except Exception:
            return None
        if not progress or not progress.get("timestamp"):
            return None
        return datetime.fromisoformat(progress["timestamp"].replace("Z", "+00:00")).timestamp()

    def query_active(self) -> bool:
        try:
            return self.query is not None and self.query.isActive
        except Exception:
            return False

    # -- whole lifecycle ---------------------------------------------------------------
    def start(self) -> None:
        """Everything up to a running query; raises Config/Rules/Topic/PreflightError."""
        cfg = self.config
        self.load_rules()
        started = time.monotonic()
        counts = self.start_kafka()
        partitions = self._partitions = counts[cfg.topics.events]
        master = self.spark.sparkContext.master if self.spark is not None else cfg.spark.master
        slots = local_slots(master)
        if slots is not None:
            check_slots(cfg.query.trigger, partitions, slots, f"spark.master={master}")
        self.start_spark()
        analyze_rules(self.spark, self.rules, cfg.rules.path)
        if slots is None:
            check_cluster_slots(self.spark, cfg.query.trigger, partitions)
        if cfg.query.warmup:
            self.warm_up()
        self._classes_before_query = self._generated_classes()
        self.start_query()
        self.start_metrics()
        # ``ready`` means "able to meet the latency targets", not "Spark accepted the
        # query": a continuous query's tasks start seconds after start() returns, and events
        # sent before that waited for them (a 60 s run counted from the old ``ready`` had a
        # p99 of 6.6 s). So wait until the tasks run (see _running).
        if not self.wait_until_processing(READY_TIMEOUT_S):
            raise RuntimeError("query did not start processing within "
                               f"{READY_TIMEOUT_S:.0f} s: {self.failure() or 'timeout'}")
        log.info("appliance.ready", bootstrap=self.bootstrap, trigger=cfg.query.trigger,
                 rules=len(self.rules), metrics_port=self.metrics_port,
                 topics=cfg.topics.model_dump(), startup_s=round(time.monotonic() - started, 2),
                 warmup_s=self.warmup.seconds if self.warmup else 0.0,
                 query_new_classes=self.query_new_classes())

    def _generated_classes(self) -> int:
        from appliance.process.session import generated_classes

        return generated_classes(self.spark)

    def query_new_classes(self) -> int:
        """Classes Spark has generated since the query was planned, warm-up excluded: 0
        while the query runs the classes the warm-up compiled and JIT-warmed (the warm-up's
        own first round, with its extra rule, generates classes of its own before that)."""
        return self._generated_classes() - self._classes_before_query

    def wait_until_processing(self, timeout: float = 60.0) -> bool:
        """True once the query's tasks really run (see ``_running``); False if it ended or
        ``timeout`` passed first."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._log_processing():
                return True
            if self._terminated(0.1):
                return False
        return False

    def _commits(self) -> set[int]:
        return set(batch_ids(Path(self.config.query.checkpoint_dir) / "commits"))

    def _tasks_launched(self) -> int:
        """Tasks the driver's task scheduler has launched and not yet seen end, over all
        executors. The scheduler counts a task as it launches it; the status tracker hears
        of it later, through the listener bus, which at start-up lagged up to 6-8 s (see
        ``_running``). ``taskScheduler`` is Spark-internal, reached through py4j. The count
        is not per query: the appliance's session runs no other job while its query runs."""
        per_executor = self.spark.sparkContext._jsc.sc().taskScheduler() \
            .runningTasksByExecutors().values().iterator()
        launched = 0
        while per_executor.hasNext():
            launched += per_executor.next()
        return launched

    def _running(self) -> bool:
        """Whether the query processes events as they come, per trigger:

        - continuous: an epoch was committed in this run. Spark's epoch coordinator
          commits an epoch only once every writer partition has committed it, so this
          proves a task per partition runs and the write path has completed once (epochs
          commit with or without data). Task counts are not asked for: the status
          tracker learns of tasks through the listener bus, which at start-up lagged
          2.5-8 s behind the first commits (measured), holding ``ready`` back;
        - real-time: a task per partition has been launched (a batch commits only at its
          end, minutes away), as the task scheduler counts them (``_tasks_launched``; the
          status tracker reported real-time tasks up to 6 s after they were reading);
        - micro-batch: a trigger completed in this run (no-data triggers report progress
          too; nothing commits before data arrives).
        """
        trigger = self.config.query.trigger
        if trigger == "microbatch":
            return self.query.lastProgress is not None
        if trigger == "realtime":
            return self._tasks_launched() >= max(self._partitions, 1)
        return bool(self._commits() - self._commits_at_start)

    def _log_processing(self) -> bool:
        """Log ``query.processing`` once, when the query is running (``_running``)."""
        if not self._processing and self.query is not None:
            try:
                self._processing = self._running()
            except Exception:  # noqa: BLE001 - the JVM went away: not running
                self._processing = False
            if self._processing:
                log.info("query.processing", trigger=self.config.query.trigger)
                if self._failed_at is not None:
                    log.info("query.recovered", restarts=self._restarts.used,
                             seconds=round(time.monotonic() - self._failed_at, 2))
                    self._failed_at = None
        return self._processing

    def _terminated(self, timeout: float) -> bool:
        """Wait up to ``timeout`` s; True if the query ended (awaitTermination raises then)."""
        try:
            return bool(self.query.awaitTermination(timeout))
        except Exception:
            return True

    def failure(self) -> str | None:
        """The query's cause of death, or None while it runs or after a clean stop."""
        if self.query is None:
            return None
        error = self.query.exception()
        if error is None:
            return None
        cause = str(error).split("=== Streaming Query ===")[0]  # drop the plan dump
        return " ".join(cause.split())[:2000]

    def _log_progress(self) -> None:
        """Log where a micro-batch/real-time batch spent its time (``durationMs`` per
        phase of Spark's last progress), at most every PROGRESS_LOG_S: the bench reads it."""
        now = time.monotonic()
        if self.config.query.trigger == "continuous" or now < self._next_progress_log:
            return
        self._next_progress_log = now + PROGRESS_LOG_S
        try:
            progress = self.query.lastProgress
        except Exception:  # noqa: BLE001 - the JVM went away; serve() reports that
            return
        if progress:
            log.info("query.progress", batch_id=progress.get("batchId"),
                     input_rows=progress.get("numInputRows"),
                     durationMs=progress.get("durationMs"))

    def epoch_watch(self) -> EpochWatch | None:
        """Continuous mode only: Spark keeps a continuous query active when its epoch
        coordinator fails to write the checkpoint (see ``appliance.query.epoch_watch``)."""
        cfg = self.config.query
        if cfg.trigger != "continuous":
            return None
        return EpochWatch(Path(cfg.checkpoint_dir), cfg.stall_timeout_s)

    def serve(self, stop: threading.Event) -> int:
        """Block until ``stop`` is set (0) or the query dies or gets stuck (1). A query
        that died of a cause ``appliance.process.restarts`` lists is started again in this
        session while its budget lasts."""
        watch = self.epoch_watch()
        while not stop.is_set():
            self._log_processing()
            self._log_progress()
            stuck = watch.stalled() if watch is not None else None
            if stuck is not None:
                log.error("query.failed", cause=stuck)
                return 1
            if self._terminated(0.5):
                if stop.is_set():
                    # SIGTERM to the whole process group (``timeout``, systemd) also stops
                    # Spark's JVM; the query ending under us is then the asked-for stop.
                    return 0
                try:
                    cause = self.failure() or "query terminated"
                except Exception as exc:  # the JVM itself is gone
                    if stop.wait(1.0):  # ...because the same SIGTERM is still on its way to us
                        return 0
                    cause = f"Spark driver unreachable: {' '.join(str(exc).split())[:500]}"
                if not self._restart_in_place(cause):
                    log.error("query.failed", cause=cause)
                    return 1
                watch = self.epoch_watch()
        return 0

    def _restart_in_place(self, cause: str) -> bool:
        """Start the failed query again in this session if its cause allows it (True);
        False: the appliance must exit 1 (the cause needs a fresh process, the budget is
        spent, or the restart itself failed)."""
        known = in_place_cause(cause)
        if known is None:
            return False
        limit = self._restarts.limit
        if not self._restarts.take():
            log.warning("query.restart_refused", marker=known.marker, limit=limit,
                        window_s=self._restarts.window_s,
                        reason="in-place restarts spent: a fresh process is next")
            return False
        self._failed_at = time.monotonic()
        log.warning("query.restarting", cause=cause, reason=known.reason,
                    restart=self._restarts.used, limit=limit)
        try:
            self._processing = False
            if local_slots(self.spark.sparkContext.master) is None:
                # The lost executor's slots come back with its replacement, seconds later.
                check_cluster_slots(self.spark, self.config.query.trigger, self._partitions)
            self.start_query()
        except Exception as exc:  # noqa: BLE001 - any reason: exit 1 for the supervisor
            log.error("query.restart_failed", error=" ".join(str(exc).split())[:2000],
                      kind=type(exc).__name__)
            return False
        if self._collector is not None:
            self._collector.recoveries += 1
        return True

    def stop(self) -> None:
        """Stop query, metrics, Spark and embedded broker; safe to call more than once.

        Each step runs even if an earlier one fails: when SIGTERM went to the whole process
        group (``timeout``, systemd's default KillMode), Spark's JVM has already shut down
        by its own hook, and the remaining steps must still release ports and the broker.
        """
        query, poller, server = self.query, self._poller, self._metrics_server
        observer = self._observer
        self._poller = self._metrics_server = self._observer = None
        spark = self.spark if self._own_spark else None
        broker, self.broker = self.broker, None
        steps = [
            ("query", query.stop if query is not None else None),
            ("metrics", poller.stop if poller is not None else None),
            ("alert_latency", observer.stop if observer is not None else None),
            ("metrics_server", (lambda: (server.shutdown(), server.server_close()))
             if server is not None else None),
            ("spark", spark.stop if spark is not None else None),
            ("broker", (lambda: broker.__exit__(None, None, None))
             if broker is not None else None),
        ]
        for name, step in steps:
            if step is None:
                continue
            try:
                step()
            except Exception as exc:
                log.warning(f"{name}.stop_failed", error=" ".join(str(exc).split())[:500])
        if spark is not None:
            self.spark = None


def run(config: Config, on_ready=None) -> int:
    """``appliance run``: start, serve until SIGTERM/SIGINT, stop; the exit code.
    ``on_ready(appliance)`` is called once it is ready (the terminal's ready line)."""
    stop = threading.Event()
    starting = threading.Event()

    def _on_signal(signum, _frame):
        log.info("appliance.stopping", signal=signal.Signals(signum).name)
        stop.set()
        if signum == signal.SIGINT and starting.is_set():
            starting.clear()
            raise KeyboardInterrupt  # Ctrl-C during the start-up: do not wait it out

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    appliance = Appliance(config)
    code = 0
    try:
        starting.set()
        appliance.start()
        starting.clear()
        if on_ready is not None:
            on_ready(appliance)
        code = appliance.serve(stop)
    except KeyboardInterrupt:
        code = 130  # interrupted during the start-up
    except (ConfigError, RulesError, TopicError, PreflightError, EmbeddedPortInUse) as exc:
        for line in str(exc).splitlines():
            print(line, file=sys.stderr, flush=True)
        code = 2
    except Exception as exc:
        log.error("appliance.failed", error=" ".join(str(exc).split())[:2000],
                  kind=type(exc).__name__)
        code = 1
    finally:
        starting.clear()
        appliance.stop()
    log.info("appliance.stopped", exit_code=code)
    return code
