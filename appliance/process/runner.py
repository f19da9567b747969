"""The appliance's lifecycle: the pieces of a run started in order, served, stopped.

Order matters: everything that can be checked without a JVM (config, rules, topics, the
CPUs kept after ``ready``, task slots for a local master, an ``[ha]`` partner and the
session timeout its Kafka takes) is checked before Spark starts, so a typo costs a second,
not a JVM start. ``Appliance`` is used in-process by ``demo``, the tests and the
benchmarks; ``run`` adds signal handling and exit codes for ``appliance run``.

Each piece is a room of its own, and this module only puts them in order:

- what the run is set to, derived once from the config and the broker's address:
  ``run_settings.RunSettings`` (tuning, Kafka client settings, connector options);
- the broker and its topics: ``kafka_side``; task slots: ``slots``; the CPUs kept after
  ``ready``: ``kept_cpus``; exit 2's error: ``preflight``;
- the rules the query runs and their rule book: ``running_rules``; a live reload of
  them: ``rules_swap``;
- the session: ``spark_side``; the query's warm-up and start: ``query_start``; what the
  runner knows of its started query: ``query_probes``; a failed query started again in
  place: ``restarts``;
- the metrics and the HTTP endpoint: ``telemetry``;
- with ``[ha]``, when the query starts (once Kafka elects this instance of its pair), from
  where, and when it steps down to wait as the standby again: ``pair_turns``.

The pieces that import pyspark or prometheus_client (``spark_side``, ``query_start``,
``telemetry``) are imported by ``Appliance.start`` once the checks that need no JVM have
passed, not above: there is no import cycle, but ``appliance run`` imports this module
before it starts, and a config or rules error should exit 2 without first waiting for
pyspark to import.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from typing import TYPE_CHECKING

from appliance import logs
from appliance.config import Config, ConfigError
from appliance.ha.instance import instance_config
from appliance.ha.session_bounds import check_session
from appliance.process.embedded_kafka import EmbeddedPortInUse
from appliance.process.kafka_side import KafkaSide
from appliance.process.kept_cpus import KeptCpus
from appliance.process.lone_progress import LoneProgress
from appliance.process.pair_turns import PairTurns, StoppedAsStandby
from appliance.process.preflight import PreflightError
from appliance.process.query_probes import READY_TIMEOUT_S, QueryProbes
from appliance.process.query_stop import stop_query
from appliance.process.reload_status import ReloadResult
from appliance.process.restarts import InPlaceRestarts, RestartBudget
from appliance.process.rules_check import RulesCheck
from appliance.process.rules_swap import RulesSwap
from appliance.process.run_settings import RunSettings
from appliance.process.running_rules import RunningRules
from appliance.process.slots import RESTART_WAIT_S, check_slots, local_slots, spark_master
from appliance.query.epoch_watch import EpochWatch, watch_for
from appliance.rules.rules_file import RulesError, RuleSet
from appliance.topics import TopicError

if TYPE_CHECKING:  # imported for real by ``Appliance.start`` (see the docstring)
    from pyspark.sql import SparkSession

    from appliance.process.query_start import QueryStart
    from appliance.process.spark_side import SparkSide
    from appliance.process.telemetry import Telemetry
    from appliance.query.warmup import WarmupResult

log = logs.get_logger("appliance")


class Appliance:
    """One broker (embedded or external), one SparkSession, one streaming query."""

    def __init__(self, config: Config, spark: SparkSession | None = None,
                 rule_set: RuleSet | None = None, rules_check: RulesCheck | None = None):
        """``spark``: an existing session to run in (tests, demo); it is not stopped.
        ``rule_set``: the rules file ``[rules] path`` names, already read and checked (the
        CLI checks it before anything starts); ``rules_check``: its check, still running
        (a large file's, ``appliance.process.rules_check``): the start takes its verdict
        once Spark's session is open; neither: the start reads the file."""
        config = instance_config(config)  # [ha]: this instance's own checkpoint folder
        self.config = config
        self.mode = config.query.mode
        self._shared_spark = spark
        self.rules = RunningRules(config.rules.path, rule_set, rules_check)
        self.rules_swap = RulesSwap(self.rules, config)
        self.probes = QueryProbes(self.mode, config.query.checkpoint_dir)
        self.cpus = KeptCpus(config.cpus)
        self.restarts = InPlaceRestarts(RestartBudget(config.query.executor_loss_restarts),
                                        self.probes.restarting)
        # The pieces each step of ``start`` brings up, for the steps after it.
        self.kafka: KafkaSide | None = None
        self.settings: RunSettings | None = None
        self.spark_side: SparkSide | None = None
        self.query_start: QueryStart | None = None
        self.telemetry: Telemetry | None = None
        self.pair: PairTurns | None = None  # [ha]: this instance's turns in its pair
        # A lone real-time instance's progress, kept for its next run's start.
        self.lone_progress: LoneProgress | None = None
        # What the start reached, for the ready line, the terminal and the tests.
        self.bootstrap: str | None = config.kafka.bootstrap_servers
        self.spark: SparkSession | None = spark
        self.metrics_port: int | None = None
        self.warmup: WarmupResult | None = None  # once warmed
        self.recovered = False  # the query resumed from an existing checkpoint

    # -- whole lifecycle ---------------------------------------------------------------
    def start(self, stop: threading.Event | None = None) -> None:
        """Everything up to a running query; raises Config/Rules/Topic/PreflightError.
        With ``[ha]``, the query starts only once this instance is its pair's active one;
        ``stop`` set while it waits as standby raises ``StoppedAsStandby``."""
        started = time.monotonic()
        settings, partitions = self._check()
        checking = self.rules.checking
        if checking is not None and checking.done():
            self.rules.running_rules()  # done while the broker started: its verdict, no JVM
        from appliance.process.query_start import QueryStart
        from appliance.process.spark_side import SparkSide
        from appliance.process.telemetry import Telemetry

        spark_side = self.spark_side = SparkSide.open(settings, self._shared_spark)
        spark = self.spark = spark_side.session
        book = spark_side.rule_book(self.mode)
        self.rules.compile_into(book)
        spark_side.check_cluster_slots(self.mode, partitions)
        self.query_start = QueryStart(settings, spark, self.probes)
        if self.config.query.warmup:
            self.warm_up()
        spark_side.mark_classes()
        pair = self.pair

        def serve_metrics() -> Telemetry:
            telemetry = self.telemetry = Telemetry.start(
                settings, self.rules, self.probes, recovered=self.recovered,
                status_page=self.rules_swap.status,
                election=(lambda: pair.election) if pair is not None else None)
            self.metrics_port = telemetry.port
            return telemetry

        if pair is not None:
            telemetry = serve_metrics()  # a standby shows its role too
            pair.await_turn(stop or threading.Event())
            self.start_query(pair.starting_offsets)
            if self.recovered:
                telemetry.count_recovery()  # its metrics started before the query
        else:
            lone = self.lone_progress = LoneProgress.for_run(self.mode, self.probes,
                                                             settings)
            self.start_query(lone.resume(partitions) if lone is not None else None)
            serve_metrics()
        # ``ready`` means "able to meet the latency targets", not "Spark accepted the
        # query": a continuous query's tasks start seconds after start() returns, and events
        # sent before that waited for them (a 60 s run counted from the old ``ready`` had a
        # p99 of 6.6 s). So wait until the tasks run (QueryProbes.running).
        if not self.probes.wait_until_processing(READY_TIMEOUT_S):
            raise RuntimeError("query did not start processing within "
                               f"{READY_TIMEOUT_S:.0f} s: {self.probes.failure() or 'timeout'}")
        self.cpus.keep(self.kafka.broker_pids if self.kafka is not None else tuple)
        if pair is not None:
            pair.serving(stop)
        rule_set = self.rules.running_rules()
        log.info("appliance.ready", bootstrap=self.bootstrap, trigger=self.mode.name,
                 rules=len(rule_set), rules_version=rule_set.version,
                 metrics_port=self.metrics_port, topics=self.config.topics.model_dump(),
                 startup_s=round(time.monotonic() - started, 2),
                 warmup_s=self.warmup.seconds if self.warmup else 0.0,
                 query_new_classes=spark_side.query_new_classes())

    def _check(self) -> tuple[RunSettings, int]:
        """The steps before Spark: CPUs, rules, Kafka and its topics, an ``[ha]`` partner,
        a local master's slots; the run's settings and the events topic's partitions."""
        cfg = self.config
        self.cpus.check()
        if self.rules.rule_set is None and self.rules.checking is None:
            self.rules.load()
        kafka = self.kafka = KafkaSide.start(cfg)
        self.bootstrap = kafka.bootstrap
        settings = self.settings = RunSettings.for_broker(cfg, kafka.bootstrap)
        kafka.ensure_topics(settings.client())
        partitions = self.probes.partitions = kafka.events_partitions
        if cfg.ha.enabled:
            pair = self.pair = PairTurns(self, settings, partitions, self.rules, self.probes)
            refusal = pair.check_partner()
            if refusal is not None:
                raise PreflightError(refusal)
            check_session(cfg.ha.session_timeout_ms, settings.client())  # SessionRefused
        shared = self._shared_spark
        master = spark_master(shared) if shared is not None else cfg.spark.master
        slots = local_slots(master)
        if slots is not None:
            check_slots(self.mode, partitions, slots, f"spark.master={master}")
        return settings, partitions

    def warm_up(self) -> float:
        """Run the query's plan on synthetic records (appliance.query.warmup) before
        ``ready`` (and, with ``[ha]``, now and then as the standby); its seconds."""
        if self.query_start is None or self.kafka is None or self.settings is None:
            raise RuntimeError("no query to warm up: start() comes first")
        topic = self.kafka.warmup_topic(self.settings.client())
        self.warmup = self.query_start.warm_up(self.rules.compiled_rules(), topic)
        return self.warmup.seconds

    def start_query(self, starting_offsets: str | None) -> None:
        """Start the query on the rule book (at start-up, after a failure or a takeover);
        ``starting_offsets``: the pair's offsets in Kafka (``[ha]``), else the config's."""
        if self.query_start is None:
            raise RuntimeError("no session to start the query in: start() comes first")
        self.recovered = self.query_start.start(
            self.rules.rule_book(), self.rules.running_rules(), starting_offsets)

    def plan_query(self) -> float:
        """Plan the next start's query now (``[ha]``: a standby, before it waits), so a
        takeover pays only Spark's start; its seconds."""
        if self.query_start is None:
            raise RuntimeError("no session to plan the query in: start() comes first")
        return self.query_start.prepare(self.rules.rule_book(), self.rules.running_rules())

    def serve(self, stop: threading.Event) -> int:
        """Block until ``stop`` is set (0) or the query dies or gets stuck (1). A query
        that died of a cause ``appliance.process.restarts`` lists is started again in this
        session while its budget lasts."""
        query = self.config.query

        def watch() -> EpochWatch | None:
            # Spark keeps a continuous query active when its epoch coordinator fails to
            # write the checkpoint (appliance.query.epoch_watch).
            return watch_for(self.mode, query.checkpoint_dir, query.stall_timeout_s)

        epochs = watch()
        while not stop.is_set():
            if self.rules_swap.take_request():
                outcome = self.rules_swap.reload()
                if outcome.result is ReloadResult.FAILED and not self.probes.active():
                    log.error("query.failed", cause=f"rules swap failed: {outcome.error}")
                    return 1
                if outcome.result is ReloadResult.APPLIED and self.pair is not None:
                    self.pair.announce()  # the partner must now agree on these
                epochs = watch()
            self.probes.log_processing()
            self.probes.log_progress()
            if self.lone_progress is not None:
                self.lone_progress.save()
            if self.pair is not None and self.pair.must_step_down():
                try:
                    if not self.pair.serve_again(stop):
                        return 1
                except StoppedAsStandby:
                    return 0
                epochs = watch()
                continue
            stuck = epochs.stalled() if epochs is not None else None
            if stuck is not None:
                log.error("query.failed", cause=stuck)
                return 1
            if self.probes.terminated(0.5):
                if stop.is_set():
                    # SIGTERM to the whole process group (``timeout``, systemd) also stops
                    # Spark's JVM; the query ending under us is then the asked-for stop.
                    return 0
                try:
                    cause = self.probes.failure() or "query terminated"
                except Exception as exc:  # the JVM itself is gone
                    if stop.wait(1.0):  # ...because the same SIGTERM is still on its way to us
                        return 0
                    cause = f"Spark driver unreachable: {' '.join(str(exc).split())[:500]}"
                if not self._restart_in_place(cause):
                    log.error("query.failed", cause=cause)
                    return 1
                epochs = watch()
        return 0

    def _restart_in_place(self, cause: str) -> bool:
        """Start the failed query again in this session if its cause allows it (True);
        False: the appliance must exit 1 (``InPlaceRestarts.attempt``)."""
        spark_side = self.spark_side
        if spark_side is None:
            return False

        def start_again() -> None:
            # The lost executors' slots come back with their replacements, seconds later,
            # or once a restarted worker registers (``slots.RESTART_WAIT_S``).
            spark_side.check_cluster_slots(self.mode, self.probes.partitions,
                                           wait_s=RESTART_WAIT_S)
            lone = self.lone_progress
            self.start_query(self.pair.starting_offsets if self.pair is not None
                             else lone.resume(self.probes.partitions) if lone is not None
                             else None)

        if not self.restarts.attempt(cause, start_again):
            return False
        if self.telemetry is not None:
            self.telemetry.count_recovery()
        return True

    def stop(self) -> None:
        """Stop query, metrics, Spark and embedded broker; safe to call more than once.

        Each step runs even if an earlier one fails: when SIGTERM went to the whole process
        group (``timeout``, systemd's default KillMode), Spark's JVM has already shut down
        by its own hook, and the remaining steps must still release ports and the broker.
        """
        query, telemetry, spark_side = self.probes.query, self.telemetry, self.spark_side
        pair, kafka, spark, probes = self.pair, self.kafka, self.spark, self.probes
        self.telemetry = self.pair = None
        book = self.rules.take_book()
        own_spark = spark_side is not None and spark_side.own
        steps = [
            # [ha] first: the last offsets to Kafka and out of the group at once, so the
            # standby starts while this query still runs (an overlap, never a gap).
            ("ha", pair.close if pair is not None else None),
            ("cpus", self.cpus.release),
            # a real-time batch ends and commits first: the next run does not replay it
            ("query", (lambda: stop_query(query, spark, probes.mode, probes.checkpoint_dir))
             if query is not None else None),
            ("metrics", telemetry.stop_feeds if telemetry is not None else None),
            ("alert_latency", telemetry.stop_observer if telemetry is not None else None),
            ("rule_book", (lambda: spark_side.close_book(book))
             if spark_side is not None and book is not None else None),
            ("metrics_server", telemetry.close_server if telemetry is not None else None),
            ("spark", spark_side.stop if own_spark and spark_side is not None else None),
            ("broker", kafka.close if kafka is not None else None),
        ]
        for name, step in steps:
            if step is None:
                continue
            try:
                step()
            except Exception as exc:
                log.warning(f"{name}.stop_failed", error=" ".join(str(exc).split())[:500])
        if own_spark:
            self.spark = self.spark_side = None


def run(config: Config, on_ready=None, rule_set: RuleSet | None = None,
        rules_check: RulesCheck | None = None) -> int:
    """``appliance run``: start, serve until SIGTERM/SIGINT, stop; the exit code.
    ``on_ready(appliance)`` is called once it is ready (the terminal's ready line);
    ``rule_set``: the rules file, already read and checked; ``rules_check``: its check,
    still running (neither: read it at start)."""
    stop = threading.Event()
    starting = threading.Event()

    def _on_signal(signum, _frame):
        log.info("appliance.stopping", signal=signal.Signals(signum).name)
        stop.set()
        if signum == signal.SIGINT and starting.is_set():
            starting.clear()
            raise KeyboardInterrupt  # Ctrl-C during the start-up: do not wait it out

    appliance = Appliance(config, rule_set=rule_set, rules_check=rules_check)

    def _on_reload(signum, _frame):
        log.info("rules.reload_requested", signal=signal.Signals(signum).name)
        appliance.rules_swap.request()

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
