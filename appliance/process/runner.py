"""The appliance's lifecycle: check everything, start the query, serve, swap rules, stop.

Order matters: everything that can be checked without a JVM (config, rules, topics,
task slots for a local master) is checked before Spark starts, so a typo costs a second,
not a JVM start. ``Appliance`` is used in-process by ``demo`` and the benchmark;
``run`` adds signal handling and exit codes for ``appliance run``.

The rules are data, not code: compiled once by the driver's Spark session into the query's
rule book (``appliance.rules.rule_book``), which the query's plan asks per event; the warm-up
runs the same plan over its own book. Two jobs live next door: what the runner knows of its
started query (processing yet, committed, failed) is ``appliance.process.query_probes``;
changing the rules without a restart (SIGHUP, ``appliance rules reload``) is
``appliance.process.rules_swap``; with ``[ha]``, when the query starts (once Kafka elects
this instance of its pair), from where, and when it steps down to wait as the standby
again is ``appliance.process.pair_turns`` (over ``appliance.ha``).

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
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from appliance import logs
from appliance.config import Config, ConfigError
from appliance.ha.instance import instance_config
from appliance.process.class_archive import resolve as resolve_class_archive
from appliance.process.cpu_affinity import ReadyCpus, allowed_problem
from appliance.process.embedded_kafka import EmbeddedPortInUse, start_embedded
from appliance.process.pair_turns import PairTurns, StoppedAsStandby
from appliance.process.query_probes import READY_TIMEOUT_S, QueryProbes
from appliance.process.reload_status import ReloadOutcome, ReloadResult
from appliance.process.restarts import RestartBudget, in_place_cause
from appliance.process.rules_swap import RulesSwap
from appliance.process.slots import wait_for_slots
from appliance.query.checkpoint import repair as repair_checkpoint
from appliance.query.epoch_watch import EpochWatch
from appliance.rules.rules_file import Rule, RulesError, RuleSet, load_rule_set
from appliance.topics import (
    TopicError,
    client_config,
    default_partitions,
    ensure_topics,
    partition_counts,
)
from appliance.trigger import RulesSwitch, TriggerMode
from appliance.tuning import IDLE_PROGRESS_INTERVAL_MS, tuning_for

if TYPE_CHECKING:  # imported for real by the methods that start these parts (docstring)
    from wsgiref.simple_server import WSGIServer

    from prometheus_client.registry import Collector
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import DataStreamWriter, StreamingQuery

    from appliance.broker import EmbeddedBroker
    from appliance.observability.alert_latency import AlertObserver
    from appliance.observability.metrics import ApplianceCollector, MetricsPoller
    from appliance.observability.rules_metrics import RulesCollector
    from appliance.query.warmup import WarmupResult
    from appliance.rules.rule_book import CompiledRules, RuleBook


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


def spark_master(spark: SparkSession) -> str:
    """The running SparkContext's master: pyspark types it Optional, but a SparkContext
    does not start without one."""
    master = spark.sparkContext.master
    if master is None:
        raise RuntimeError("the SparkContext has no master (spark.master)")
    return master


def check_slots(mode: TriggerMode, partitions: int, slots: int, where: str,
                fix: str | None = None) -> None:
    """A query of long-running tasks hangs (never fails) without a slot per partition."""
    if mode.slot_per_partition and slots < partitions:
        fix = fix or f'e.g. spark.master = "local[{partitions}]"'
        raise PreflightError(
            f"query.trigger={mode.name} needs one task slot per input partition: the events "
            f"topic has {partitions} partitions but {where} gives {slots} slots; "
            f"use at least {partitions} ({fix})")


def check_cluster_slots(spark, mode: TriggerMode, partitions: int) -> None:
    """On a cluster: wait (bounded) for this application's executors, then check slots."""
    if not mode.slot_per_partition:
        return
    sc = spark.sparkContext
    slots, waited = wait_for_slots(sc, partitions)
    log.info("spark.executors", slots=slots, needed=partitions, waited_s=round(waited, 1))
    check_slots(mode, partitions, slots,
                f"{sc.master} (cores granted to this application)",
                fix="more workers or cores, a higher spark.cores.max, or fewer partitions")


class Appliance:
    """One broker (embedded or external), one SparkSession, one streaming query."""

    def __init__(self, config: Config, spark: SparkSession | None = None,
                 rule_set: RuleSet | None = None):
        """``spark``: an existing session to run in (tests, demo); it is not stopped.
        ``rule_set``: the rules file ``[rules] path`` names, already read and checked (the
        CLI checks it before anything starts); None: ``start`` reads it."""
        config = instance_config(config)  # [ha]: this instance's own checkpoint folder
        self.config = config
        self.mode = config.query.mode
        self._own_spark = spark is None
        self.rule_set: RuleSet | None = rule_set
        self.broker: EmbeddedBroker | None = None
        self.bootstrap: str | None = config.kafka.bootstrap_servers
        self.spark: SparkSession | None = spark
        self.probes = QueryProbes(self.mode, config.query.checkpoint_dir)
        self.metrics_port: int | None = None
        self._metrics_server: WSGIServer | None = None
        self._poller: MetricsPoller | None = None
        self._observer: AlertObserver | None = None
        self.recovered = False  # the query resumed from an existing checkpoint
        self.warmup: WarmupResult | None = None  # once warmed
        self._classes_before_query = 0  # see query_new_classes
        self._collector: ApplianceCollector | None = None  # once serving
        self._restarts = RestartBudget(config.query.executor_loss_restarts)
        self.rules_swap = RulesSwap(self, config)
        self.book: RuleBook | None = None  # once Spark runs
        self.compiled: CompiledRules | None = None  # the rules compiled at start-up
        self.rules_metrics: RulesCollector | None = None  # once serving
        self._cpus: ReadyCpus | None = None  # once ready, with [cpus] after_ready
        self.pair: PairTurns | None = None  # [ha]: this instance's turns in its pair
        self.starting_offsets: str | None = None  # [ha]: the pair's offsets in Kafka

    @property
    def query(self) -> StreamingQuery | None:
        """The streaming query started last (``start_query``)."""
        return self.probes.query

    @property
    def rules(self) -> tuple[Rule, ...]:
        """The rules the query runs (none before ``load_rules``)."""
        return self.rule_set.rules if self.rule_set is not None else ()

    # The parts each step of ``start`` brings up, for the steps after it: asking for one
    # before its step ran is a programming error, said as such.
    def running_rules(self) -> RuleSet:
        if self.rule_set is None:
            raise RuntimeError("no rules loaded: load_rules() comes first")
        return self.rule_set

    def session(self) -> SparkSession:
        if self.spark is None:
            raise RuntimeError("no SparkSession: start_spark() comes first")
        return self.spark

    def rule_book(self) -> RuleBook:
        if self.book is None:
            raise RuntimeError("no rule book: compile_rules() comes first")
        return self.book

    def _compiled(self) -> CompiledRules:
        if self.compiled is None:
            raise RuntimeError("no compiled rules: compile_rules() comes first")
        return self.compiled

    def _bootstrap_servers(self) -> str:
        if self.bootstrap is None:
            raise RuntimeError("no broker: start_kafka() comes first")
        return self.bootstrap

    # -- checks that need no JVM -------------------------------------------------------
    def load_rules(self) -> RuleSet:
        self.rule_set = load_rule_set(self.config.rules.path)
        return self.rule_set

    def start_kafka(self) -> dict[str, int]:
        """Start the embedded broker if none is configured; make sure topics exist."""
        if self.bootstrap is None:
            output = logs.output()  # on a terminal, the broker's lines join the log file
            broker = self.broker = start_embedded(self.config.kafka,
                                                  output.file if output else None)
            self.bootstrap = broker.bootstrap
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
        return client_config(self.config.kafka, self._bootstrap_servers())

    # -- Spark -------------------------------------------------------------------------
    def start_spark(self) -> None:
        from appliance.process.session import apply_sql_settings, build_session, spark_conf

        archive = None
        if self.spark is None:
            archive = resolve_class_archive(self.config.spark.class_archive)
            spark = self.spark = build_session(self.config, class_archive=archive)
        else:
            # A shared session (tests, bench): run in a child session so the appliance's
            # SQL settings (e.g. ANSI off) apply to its query and nobody else's.
            spark = self.spark = self.spark.newSession()
            apply_sql_settings(spark, spark_conf(self.config))
        log.info("spark.ready", master=spark.sparkContext.master,
                 version=spark.version, app_id=spark.sparkContext.applicationId,
                 class_archive=str(archive) if archive else None)

    def connector_options(self) -> tuple[dict[str, str], dict[str, str]]:
        """The source's and the sink's connector options (bootstrap, tuning, pass-through):
        one definition for the query and its warm-up, so both share the cached producer."""
        cfg = self.config
        tuning = tuning_for(self.mode, cfg.query.async_progress)
        # Java spelling of the [kafka] settings (client_security): credentials given as
        # sasl.username/sasl.password become sasl.jaas.config, a PEM CA a truststore.
        passthrough = {f"kafka.{k}": v for k, v in cfg.kafka.java_properties.items()}
        bootstrap = {"kafka.bootstrap.servers": self._bootstrap_servers()}
        # [source]/[sink] (an operator's or the deploy's reader/writer settings) override
        # the tuning; [kafka] client properties apply to both.
        return ({**bootstrap, **tuning.source_options, **cfg.source.options, **passthrough},
                {**bootstrap, **tuning.sink_options, **cfg.sink.options, **passthrough})

    def compile_rules(self) -> None:
        """Compile the loaded rules with Spark's analyzer into the query's rule book (raises
        ``RulesError`` listing every rule Spark refuses)."""
        from appliance.rules.rule_book import RuleBook

        rule_set = self.running_rules()
        started = time.monotonic()
        live = self.mode.rules_switch is RulesSwitch.LIVE
        book = self.book = self.book or RuleBook(self.session(), live=live)
        compiled = self.compiled = book.compile(rule_set)
        book.publish(compiled)
        timings = compiled.timings
        log.info("rules.compiled", rules=len(rule_set), version=rule_set.version,
                 seconds=round(time.monotonic() - started, 3), parse_ms=timings.parse_ms,
                 analyze_ms=timings.analyze_ms, optimize_ms=timings.optimize_ms,
                 analyses=timings.analyses, index=compiled.index)

    def warm_up(self) -> None:
        """Run the query's plan on synthetic records (appliance.query.warmup) before ``ready``."""
        from appliance.query.warmup import START, StreamWarmup, warm_up

        source, sink = self.connector_options()
        plan = START
        cfg = self.config.query
        if self.mode.plans_every_batch and cfg.warmup_batches > 0:
            tuning = tuning_for(self.mode, cfg.async_progress)
            # The streaming batches run the exact plan's records too: no rounds beyond the
            # minimum before them, so they cost the start-up less.
            plan = replace(START, budget_s=0.0, stream=StreamWarmup(
                self.mode.eager_trigger_kwargs(), self.mode.output_mode, tuning.query_options,
                batches=cfg.warmup_batches))
        self.warmup = warm_up(self.session(), self._compiled(), self.warmup_topic(),
                              self.client_config(), source, sink,
                              latency_headers=self.config.metrics.alert_latency, plan=plan)

    def plan_query(self) -> DataStreamWriter:
        """The query, built and ready to start: it evaluates the rule book's rules, whatever
        version the book holds when each epoch or batch begins."""
        from appliance.query.stream_query import StreamSpec, stream_writer

        cfg = self.config
        tuning = tuning_for(self.mode, cfg.query.async_progress)
        source, sink = self.connector_options()
        # The operator's [source] options after the topic and offsets, as they always were.
        spec = StreamSpec(
            name="appliance",
            reader_options={"subscribe": cfg.topics.events,
                            "startingOffsets": self.starting_offsets
                            or cfg.query.starting_offsets, **source},
            writer_options={**sink, **tuning.query_options},
            checkpoint=cfg.query.checkpoint_dir, output_mode=self.mode.output_mode,
            trigger=self.mode.trigger_kwargs(cfg.query.trigger_interval),
            topics=cfg.topics, latency_headers=cfg.metrics.alert_latency)
        return stream_writer(self.session(), self.rule_book(), spec)

    def start_query(self) -> None:
        """Start the query on the rule book (at start-up, and again after a failure)."""
        cfg = self.config
        writer = self.plan_query()
        self.repair_checkpoint()
        Path(cfg.query.checkpoint_dir).mkdir(parents=True, exist_ok=True)
        self.recovered = self.probes.starting()
        query = writer.start()
        self.probes.started(query, self.session())
        log.info("query.started", id=str(query.id), trigger=self.mode.name,
                 interval=cfg.query.interval, checkpoint=cfg.query.checkpoint_dir,
                 rules_version=self.running_rules().version)

    def repair_checkpoint(self) -> None:
        """Move aside what a crash left in the checkpoint (see ``appliance.query.checkpoint``)."""
        for fix in repair_checkpoint(self.config.query.checkpoint_dir):
            log.warning("checkpoint.repaired", path=fix.path, moved_to=fix.moved_to,
                        reason=fix.reason)

    def start_metrics(self) -> None:
        from appliance.observability.alert_latency import AlertObserver, LatencyHistogram
        from appliance.observability.http import serve
        from appliance.observability.metrics import ApplianceCollector, MetricsPoller
        from appliance.observability.rules_metrics import RulesCollector
        from appliance.process.reload_status import STATUS_PATH
        from appliance.rules.book_stats import PAGE_PATH as STATS_PATH

        query = self.config.query
        collector = self._collector = ApplianceCollector(
            self.mode.name, recovered=self.recovered,
            progress_interval_s=self.mode.progress_interval_s(query.trigger_interval,
                                                              IDLE_PROGRESS_INTERVAL_MS))
        rule_set = self.running_rules()
        top_rules = self.config.metrics.top_rules
        rules_metrics = self.rules_metrics = RulesCollector(
            rule_set.version, len(rule_set), stats=self.rule_book().stats, top_rules=top_rules)
        poller = self._poller = MetricsPoller(
            collector, self.client_config(), self.config.topics,
            self.config.query.checkpoint_dir, self.query_active,
            last_progress=self.probes.last_progress_time)
        poller.start()
        collectors: list[Collector] = [collector, rules_metrics]
        pair = self.pair
        if pair is not None:
            from appliance.ha.ha_metrics import HaCollector

            collectors.append(HaCollector(lambda: pair.election))
        if self.config.metrics.alert_latency:
            histogram = LatencyHistogram()
            observer = self._observer = AlertObserver(histogram, self.client_config(),
                                                      self.config.topics.alerts)
            observer.start()
            collectors.extend((histogram, observer))
        self._metrics_server, self.metrics_port = serve(
            collectors, self.config.metrics.host, self.config.metrics.port,
            pages={STATUS_PATH: self.rules_swap.status,
                   STATS_PATH: lambda: rules_metrics.book_stats().page(top_rules)})

    def query_active(self) -> bool:
        return self.probes.active()

    # -- whole lifecycle ---------------------------------------------------------------
    def start(self, stop: threading.Event | None = None) -> None:
        """Everything up to a running query; raises Config/Rules/Topic/PreflightError.
        With ``[ha]``, the query starts only once this instance is its pair's active one;
        ``stop`` set while it waits as standby raises ``StoppedAsStandby``."""
        cfg = self.config
        self.check_cpus()
        if self.rule_set is None:
            self.load_rules()
        started = time.monotonic()
        counts = self.start_kafka()
        partitions = self.probes.partitions = counts[cfg.topics.events]
        if cfg.ha.enabled:
            pair = self.pair = PairTurns(self, cfg, partitions)
            refusal = pair.check_partner()
            if refusal is not None:
                raise PreflightError(refusal)
        master = spark_master(self.spark) if self.spark is not None else cfg.spark.master
        slots = local_slots(master)
        if slots is not None:
            check_slots(self.mode, partitions, slots, f"spark.master={master}")
        self.start_spark()
        self.compile_rules()
        if slots is None:
            check_cluster_slots(self.session(), self.mode, partitions)
        if cfg.query.warmup:
            self.warm_up()
        self._classes_before_query = self.generated_classes()
        if self.pair is not None:
            self.start_metrics()  # a standby shows its role too
            self.pair.await_turn(stop or threading.Event())
            self.start_query()
            if self.recovered and self._collector is not None:
                self._collector.recoveries += 1  # its metrics started before the query
        else:
            self.start_query()
            self.start_metrics()
        # ``ready`` means "able to meet the latency targets", not "Spark accepted the
        # query": a continuous query's tasks start seconds after start() returns, and events
        # sent before that waited for them (a 60 s run counted from the old ``ready`` had a
        # p99 of 6.6 s). So wait until the tasks run (QueryProbes.running).
        if not self.wait_until_processing(READY_TIMEOUT_S):
            raise RuntimeError("query did not start processing within "
                               f"{READY_TIMEOUT_S:.0f} s: {self.failure() or 'timeout'}")
        self.keep_cpus()
        if self.pair is not None:
            self.pair.serving()
        log.info("appliance.ready", bootstrap=self.bootstrap, trigger=self.mode.name,
                 rules=len(self.rules), rules_version=self.running_rules().version,
                 metrics_port=self.metrics_port,
                 topics=cfg.topics.model_dump(), startup_s=round(time.monotonic() - started, 2),
                 warmup_s=self.warmup.seconds if self.warmup else 0.0,
                 query_new_classes=self.query_new_classes())

    def check_cpus(self) -> None:
        """``[cpus] after_ready`` must leave this process some CPU it may use to others."""
        kept = self.config.cpus.kept
        if kept:
            problem = allowed_problem(kept, frozenset(os.sched_getaffinity(0)))
            if problem is not None:
                raise PreflightError(f"cpus.after_ready: {problem}")

    def keep_cpus(self) -> None:
        """From ``ready`` on, for ``[cpus] after_ready_for``: the appliance's processes on
        ``[cpus] after_ready`` (appliance.process.cpu_affinity); the embedded broker's stay."""
        cpus = self.config.cpus
        if cpus.kept and self._cpus is None:
            self._cpus = ReadyCpus(cpus.kept, cpus.kept_s, excluded=self._broker_pids)
            self._cpus.start()

    def _broker_pids(self) -> list[int]:
        proc = self.broker.proc if self.broker is not None else None
        return [proc.pid] if proc is not None else []

    def warmup_seconds(self) -> float:
        return self.warmup.seconds if self.warmup else 0.0

    def generated_classes(self) -> int:
        from appliance.process.session import generated_classes

        return generated_classes(self.session())

    def query_new_classes(self) -> int:
        """Classes Spark has generated since the query was planned, warm-up excluded: 0
        while the query runs the classes the warm-up compiled and JIT-warmed."""
        return self.generated_classes() - self._classes_before_query

    def wait_until_processing(self, timeout: float = 60.0) -> bool:
        """True once the query's tasks really run; False if it ended or ``timeout`` passed
        first (``QueryProbes.wait_until_processing``)."""
        return self.probes.wait_until_processing(timeout)

    def failure(self) -> str | None:
        """The query's cause of death, or None while it runs or after a clean stop."""
        return self.probes.failure()

    def epoch_watch(self) -> EpochWatch | None:
        """Where epochs commit every interval: Spark keeps a continuous query active when
        its epoch coordinator fails to write the checkpoint (``appliance.query.epoch_watch``)."""
        cfg = self.config.query
        if not self.mode.commits_every_interval:
            return None
        return EpochWatch(Path(cfg.checkpoint_dir), cfg.stall_timeout_s)

    def serve(self, stop: threading.Event) -> int:
        """Block until ``stop`` is set (0) or the query dies or gets stuck (1). A query
        that died of a cause ``appliance.process.restarts`` lists is started again in this
        session while its budget lasts."""
        watch = self.epoch_watch()
        while not stop.is_set():
            if self.rules_swap.take_request():
                outcome = self.reload_rules()
                if outcome.result is ReloadResult.FAILED and not self.query_active():
                    log.error("query.failed", cause=f"rules swap failed: {outcome.error}")
                    return 1
                if outcome.result is ReloadResult.APPLIED and self.pair is not None:
                    self.pair.announce()  # the partner must now agree on these
                watch = self.epoch_watch()
            self.probes.log_processing()
            self.probes.log_progress()
            if self.pair is not None and self.pair.must_step_down():
                try:
                    if not self.pair.serve_again(stop):
                        return 1
                except StoppedAsStandby:
                    return 0
                watch = self.epoch_watch()
                continue
            stuck = watch.stalled() if watch is not None else None
            if stuck is not None:
                log.error("query.failed", cause=stuck)
                return 1
            if self.probes.terminated(0.5):
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
        self.probes.restarting(self._restarts.used)
        log.warning("query.restarting", cause=cause, reason=known.reason,
                    restart=self._restarts.used, limit=limit)
        try:
            spark = self.session()
            if local_slots(spark_master(spark)) is None:
                # The lost executor's slots come back with its replacement, seconds later.
                check_cluster_slots(spark, self.mode, self.probes.partitions)
            self.start_query()
        except Exception as exc:  # noqa: BLE001 - any reason: exit 1 for the supervisor
            log.error("query.restart_failed", error=" ".join(str(exc).split())[:2000],
                      kind=type(exc).__name__)
            return False
        if self._collector is not None:
            self._collector.recoveries += 1
        return True

    # -- rules reload ------------------------------------------------------------------
    def request_reload(self) -> None:
        """Ask ``serve`` to reload the rules file (safe from a signal handler)."""
        self.rules_swap.request()

    def reload_rules(self) -> ReloadOutcome:
        """Re-read ``[rules] path`` and publish it into the query (``RulesSwap.reload``)."""
        return self.rules_swap.reload()

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
        book, self.book = self.book, None
        cpus, self._cpus = self._cpus, None
        pair, self.pair = self.pair, None

        def close_metrics_server() -> None:
            if server is not None:
                server.shutdown()
                server.server_close()

        steps = [
            # [ha] first: the last offsets to Kafka and out of the group at once, so the
            # standby starts while this query still runs (an overlap, never a gap).
            ("ha", pair.close if pair is not None else None),
            ("cpus", cpus.release if cpus is not None else None),
            ("query", query.stop if query is not None else None),
            ("metrics", poller.stop if poller is not None else None),
            ("alert_latency", observer.stop if observer is not None else None),
            ("rule_book", book.close if book is not None and spark is None else None),
            ("metrics_server", close_metrics_server if server is not None else None),
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


def run(config: Config, on_ready=None, rule_set: RuleSet | None = None) -> int:
    """``appliance run``: start, serve until SIGTERM/SIGINT, stop; the exit code.
    ``on_ready(appliance)`` is called once it is ready (the terminal's ready line);
    ``rule_set``: the rules file, already read and checked (None: read it at start)."""
    stop = threading.Event()
    starting = threading.Event()

    def _on_signal(signum, _frame):
        log.info("appliance.stopping", signal=signal.Signals(signum).name)
        stop.set()
        if signum == signal.SIGINT and starting.is_set():
            starting.clear()
            raise KeyboardInterrupt  # Ctrl-C during the start-up: do not wait it out

    appliance = Appliance(config, rule_set=rule_set)

    def _on_reload(signum, _frame):
        log.info("rules.reload_requested", signal=signal.Signals(signum).name)
        appliance.request_reload()

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGHUP, _on_reload)
    code = 0
    try:
        starting.set()
        appliance.start(stop)
        starting.clear()
        if on_ready is not None:
            on_ready(appliance)
        code = appliance.serve(stop)
    except KeyboardInterrupt:
        code = 130  # interrupted during the start-up
    except StoppedAsStandby:
        code = 0
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
