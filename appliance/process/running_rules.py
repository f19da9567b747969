"""The rules the query runs: loaded and checked without a JVM, compiled by Spark into the
query's rule book, replaced by a live reload.

The rules are data, not code: compiled once by the driver's Spark session into the
query's rule book (``appliance.rules.rule_book``), which the query's plan asks per event.
This object is the one place that knows which rule set runs, its book and its metrics;
the start-up fills it in (``load``, ``compile_into``) and a reload
(``appliance.process.rules_swap``) replaces its rule set.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from appliance import logs
from appliance.process.rules_check import RulesCheck
from appliance.rules.rules_file import Rule, RuleSet, load_rule_set

if TYPE_CHECKING:  # pyspark and prometheus_client load with the parts that use them
    from appliance.observability.rules_metrics import RulesCollector
    from appliance.rules.rule_book import CompiledRules, RuleBook

log = logs.get_logger("appliance")


class RunningRules:
    """The running rule set, its rule book once Spark runs, its metrics once served."""

    def __init__(self, path: str | Path, rule_set: RuleSet | None = None,
                 checking: RulesCheck | None = None) -> None:
        """``rule_set``: ``path``'s rules, already read and checked (``appliance run``
        checks them before anything starts); ``checking``: their check, still running
        (a large file's: ``appliance.process.rules_check``); neither: ``load`` reads them."""
        self.path = path
        self.rule_set: RuleSet | None = rule_set  # the rules the query runs, once loaded
        self.checking = checking if rule_set is None else None
        self.book: RuleBook | None = None  # once compiled
        self.compiled: CompiledRules | None = None  # the rules compiled at start-up
        self.rules_metrics: RulesCollector | None = None  # once serving

    @property
    def rules(self) -> tuple[Rule, ...]:
        """The rules the query runs (none before ``load``)."""
        return self.rule_set.rules if self.rule_set is not None else ()

    def load(self) -> RuleSet:
        """Read and check ``[rules] path`` (``RulesError`` lists every problem)."""
        self.rule_set = load_rule_set(self.path)
        return self.rule_set

    # The parts each start-up step brings, for the steps after it: asking for one before
    # its step ran is a programming error, said as such.
    def running_rules(self) -> RuleSet:
        """The rules, waiting for their check if it still runs (``RulesError`` if it
        refused them)."""
        if self.rule_set is None and self.checking is not None:
            waited = time.monotonic()
            self.rule_set = self.checking.result()
            log.info("rules.checked", rules=len(self.rule_set), seconds=self.checking.seconds,
                     waited_s=round(time.monotonic() - waited, 3))
            self.checking = None
        if self.rule_set is None:
            raise RuntimeError("no rules loaded: load() comes first")
        return self.rule_set

    def rule_book(self) -> RuleBook:
        if self.book is None:
            raise RuntimeError("no rule book: compile_into() comes first")
        return self.book

    def compiled_rules(self) -> CompiledRules:
        if self.compiled is None:
            raise RuntimeError("no compiled rules: compile_into() comes first")
        return self.compiled

    def compile_into(self, book: RuleBook) -> CompiledRules:
        """Compile the loaded rules with Spark's analyzer into ``book`` and publish them
        there (raises ``RulesError`` listing every rule Spark refuses)."""
        rule_set = self.running_rules()
        started = time.monotonic()
        self.book = book
        compiled = self.compiled = book.compile(rule_set)
        book.publish(compiled)
        timings = compiled.timings
        log.info("rules.compiled", rules=len(rule_set), version=rule_set.version,
                 seconds=round(time.monotonic() - started, 3), parse_ms=timings.parse_ms,
                 analyze_ms=timings.analyze_ms, optimize_ms=timings.optimize_ms,
                 analyses=timings.analyses, index=compiled.index)
        return compiled

    def take_book(self) -> RuleBook | None:
        """The book, for the stop to close; none after (once)."""
        book, self.book = self.book, None
        return book
