"""The run's SparkSession: its own driver, or a child of a session it was given; the rule
book in it; the classes Spark's code generator compiled.

A session of its own gets the appliance's whole Spark conf and its driver's
class-data-sharing archive (``appliance.process.class_archive``) and is stopped with the
appliance. A given one (tests, the demo, the benchmarks) is shared: the appliance runs in
a child session so its SQL settings (e.g. ANSI off) apply to its query and nobody else's,
and leaves the session running at the stop.

This module imports pyspark: the runner imports it only once the checks that need no JVM
have passed (``appliance.process.runner``).
"""

from __future__ import annotations

from pyspark.sql import SparkSession

from appliance import logs
from appliance.process.class_archive import resolve as resolve_class_archive
from appliance.process.run_settings import RunSettings
from appliance.process.session import (
    apply_sql_settings,
    build_session,
    generated_classes,
    spark_conf,
)
from appliance.process.slots import check_cluster_slots, local_slots, spark_master
from appliance.rules.rule_book import RuleBook
from appliance.trigger import RulesSwitch, TriggerMode

log = logs.get_logger("appliance")


class SparkSide:
    """The session the query runs in, and whether the appliance stops it."""

    def __init__(self, session: SparkSession, own: bool) -> None:
        self.session = session
        self.own = own
        self._classes_before_query = 0  # see ``query_new_classes``

    @classmethod
    def open(cls, settings: RunSettings, shared: SparkSession | None = None) -> SparkSide:
        """A new driver (``shared`` None), else a child session of ``shared``; either
        with the run's tuning."""
        config, tuning = settings.config, settings.tuning
        archive = None
        if shared is None:
            archive = resolve_class_archive(config.spark.class_archive)
            spark = build_session(config, class_archive=archive, tuning=tuning)
        else:
            spark = shared.newSession()
            apply_sql_settings(spark, spark_conf(config, tuning=tuning))
        log.info("spark.ready", master=spark.sparkContext.master,
                 version=spark.version, app_id=spark.sparkContext.applicationId,
                 class_archive=str(archive) if archive else None)
        return cls(spark, own=shared is None)

    def rule_book(self, mode: TriggerMode) -> RuleBook:
        """A rule book in this session, switching versions as ``mode`` does."""
        return RuleBook(self.session, live=mode.rules_switch is RulesSwitch.LIVE)

    def check_cluster_slots(self, mode: TriggerMode, partitions: int,
                            wait_s: float | None = None) -> None:
        """On a cluster master: wait (bounded: ``wait_s``, else Spark's registration wait)
        for this application's executors' slots, then check them (``PreflightError``); a
        local master's were checked before."""
        if local_slots(spark_master(self.session)) is None:
            check_cluster_slots(self.session, mode, partitions, wait_s)

    def mark_classes(self) -> None:
        """The query is planned next: classes generated from here on are its own."""
        self._classes_before_query = generated_classes(self.session)

    def query_new_classes(self) -> int:
        """Classes Spark has generated since the query was planned, warm-up excluded: 0
        while the query runs the classes the warm-up compiled and JIT-warmed."""
        return generated_classes(self.session) - self._classes_before_query

    def close_book(self, book: RuleBook) -> None:
        """Close ``book`` in a shared session (an own session's stop takes it along)."""
        if not self.own:
            book.close()

    def stop(self) -> None:
        """Stop the session if it is the appliance's own."""
        if self.own:
            self.session.stop()
