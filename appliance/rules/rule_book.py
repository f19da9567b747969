"""The running query's rules as data: compiled once by Spark, swapped between epochs.

Why: compiled into the plan as one ``CASE WHEN`` per rule, every event evaluated every rule,
start-up and each swap planned and generated code for all of them, and a swap restarted the
query (alerting waited 1.4-1.6 s). Here the plan holds one expression that asks a *rule book*
for the rules (the connector's ``io.appliance.rules``): the book indexes them by the
equalities they require (``metric = 'x'``, ``source IN (...)``, ``tags['k'] = 'v'``), so an
event is evaluated only against the rules it can match, and a new version is published into
the running query, taking effect from the next epoch (continuous) or micro-batch that no task
has entered yet, or at each task's next record in a real-time batch (which lasts minutes):
no restart, no gap.

What a rule means does not change: every ``when`` is parsed, analyzed and optimized by the
appliance's Spark session (all rules as one projection, the cost of one query; a failing
analysis is halved down to the rules at fault, each named with Spark's message), and
evaluated by Spark's own interpreted ``eval``. ``appliance.rules.naive_rules`` keeps the
plan-compiled evaluation as the reference the differential tests hold this one to.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from py4j.java_gateway import JavaObject
from pyspark.sql import Column, SparkSession

from appliance.connector import driver_jvm
from appliance.events import EVENT_DDL, REQUIRED
from appliance.rules.book_stats import EMPTY, BookStats, RuleCounts
from appliance.rules.rules_file import RulesError, RuleSet

#: Event fields the index prefers as keys, best first (a ``tags[...]`` entry ranks after
#: them): ``metric`` splits a firehose most evenly, ``source`` next.
INDEX_PREFERENCE = ("metric", "source", "event_id")


@dataclass(frozen=True)
class CompileTimings:
    """Where compiling a rule set's time went (milliseconds), for the log."""

    parse_ms: int
    analyze_ms: int
    optimize_ms: int
    analyses: int  # Spark analyses run: 1 when every rule is fine


@dataclass(frozen=True)
class CompiledRules:
    """A rule set compiled by the driver's Spark session, ready to publish."""

    rule_set: RuleSet
    version: JavaObject  # io.appliance.rules.RuleSetVersion
    timings: CompileTimings

    def plus(self, more: CompiledRules) -> CompiledRules:
        """These rules followed by ``more``'s, under this set's version (the warm-up's)."""
        rule_set = RuleSet(rules=(*self.rule_set.rules, *more.rule_set.rules),
                           version=self.rule_set.version, source=self.rule_set.source)
        return CompiledRules(rule_set, self.version.plus(more.version), self.timings)

    @property
    def index(self) -> str:
        """How the rules are indexed: keys, residual rules, most candidates per event, rules
        with a threshold."""
        return str(self.version.describeIndex())

    @property
    def thresholds(self) -> list[str]:
        """Per rule, the comparisons checked before it is evaluated (``value >= 98.0``,
        several joined by `` AND ``; ``""``: none): ``Threshold.java``."""
        return str(self.version.describeThresholds()).split("\n")[:-1]


@dataclass(frozen=True)
class Publication:
    """A published version: its number in the book, and the first epoch or batch it runs
    (None: every one, the book had run nothing yet)."""

    seq: int
    effective_from: int | None


def rules_json(rule_set: RuleSet) -> str:
    """``rule_set`` as ``RuleCompiler.compile`` reads it."""
    return json.dumps({"version": rule_set.version, "rules": [
        {"id": r.id, "severity": r.severity, "ordinal": r.ordinal, "message": r.message,
         "when": r.when} for r in rule_set.rules]})


def compile_rules(spark: SparkSession, rule_set: RuleSet) -> CompiledRules:
    """Compile ``rule_set`` with ``spark``'s analyzer and optimizer; raises ``RulesError``
    with one line per rule Spark refuses (file, rule id, Spark's reason)."""
    jvm = driver_jvm(spark)
    compiled = jvm.io.appliance.rules.RuleCompiler.compile(
        spark._jsparkSession, EVENT_DDL, ",".join(INDEX_PREFERENCE),
        ",".join(f.name for f in REQUIRED), rules_json(rule_set))
    problems = json.loads(compiled.problemsJson())
    if problems:
        rules = rule_set.rules
        raise RulesError([f"{rule_set.source}: rule {rules[index].id!r}: when: {reason}"
                          for index, reason in problems])
    timings = json.loads(compiled.timingsJson())
    return CompiledRules(rule_set, compiled.version(), CompileTimings(**timings))


class RuleBook:
    """One query's rule book on the driver (``io.appliance.rules.RuleBook``).

    ``live``: the query's tasks take a new version at their next record rather than from
    their next epoch or batch (real-time batches last minutes: ``TriggerMode.rules_switch``).
    """

    def __init__(self, spark: SparkSession, live: bool = False):
        self._spark = spark
        self.live = live
        self._book = driver_jvm(spark).io.appliance.rules.RuleBook
        self.id: str = self._book.open(EVENT_DDL)
        self.published: CompiledRules | None = None

    @classmethod
    def holding(cls, spark: SparkSession, rule_set: RuleSet, live: bool = False) -> RuleBook:
        """A new book with ``rule_set`` compiled and published (tests, benchmarks, tools)."""
        book = cls(spark, live)
        book.publish(book.compile(rule_set))
        return book

    def compile(self, rule_set: RuleSet) -> CompiledRules:
        return compile_rules(self._spark, rule_set)

    def publish(self, compiled: CompiledRules) -> Publication:
        """Make ``compiled`` the running rules from the next epoch or batch no task has
        entered (every one, if none has run)."""
        start = int(self._book.publish(self.id, compiled.version))
        self.published = compiled
        seq = int(self._book.newestSeq(self.id))
        return Publication(seq=seq, effective_from=None if start == -(2 ** 63) else start)

    def reached(self, seq: int) -> bool:
        """Whether a task has run under version ``seq`` (or a newer one)."""
        return bool(self._book.reached(self.id, seq))

    def frontier(self) -> int:
        return int(self._book.frontier(self.id))

    def new_lineage(self) -> int:
        """Before planning a query on a fresh checkpoint (its epochs or batches numbered
        from 0 again, as after a pair's takeover in the same session): its generations
        start past every one this book has seen, so the newest version is in effect and
        a later one takes effect from the query's next generation; the base, which the
        plan's matchers add to their epoch or batch ids."""
        return int(self._book.newLineage(self.id))

    def column(self, event: Column) -> Column:
        """The rules' verdict on ``event`` (a struct of the event's fields in
        ``appliance.events.FIELDS`` order): ``struct<version string, rules
        array<struct<id, severity, message, ordinal int>>>``."""
        return Column(self._book.column(self.id, event._jc, self.live))

    def stats(self) -> BookStats:
        """Per-rule counts since the book opened (executors' counts arrive every 2 s)."""
        raw = json.loads(self._book.stats(self.id))
        if not raw:
            return EMPTY
        return BookStats(version=raw["version"], events=raw["events"],
                         frontier=raw["frontier"],
                         rules=tuple(RuleCounts(id=r[0], evaluated=r[1], matched=r[2],
                                                index_key=r[3]) for r in raw["rules"]))

    def close(self) -> None:
        self._book.close(self.id)
