"""The reference evaluation of the rules: one ``CASE WHEN`` per rule, compiled into the plan.

This is how the appliance evaluated rules before the rule book (``appliance.rules.rule_book``)
and the meaning the book must keep: the differential tests run seeded random rule sets and
events through both and require the same alerts and dead letters, record for record; the
benchmarks use it as the baseline. Every event evaluates every rule here, and the plan (its
analysis, optimization and generated code) grows with the rule count, so the appliance does
not run it.

It yields the same column as ``RuleBook.column``: ``struct<version, rules>``.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from appliance.rules.rules_file import RuleSet


class NaiveRules:
    """``rule_set`` compiled into the plan (the reference the rule book is tested against)."""

    def __init__(self, rule_set: RuleSet):
        self.rule_set = rule_set

    def column(self, event: Column) -> Column:
        """The verdict on ``event`` (a struct of the event's fields)."""
        candidates = [
            F.when(F.coalesce(F.expr(rule.when).cast("boolean"), F.lit(False)),
                   F.struct(F.lit(rule.id).alias("id"), F.lit(rule.severity).alias("severity"),
                            F.lit(rule.message).alias("message"),
                            F.lit(rule.ordinal).alias("ordinal")))
            for rule in self.rule_set.rules
        ]
        # The rules that did not match are null.
        return F.struct(F.lit(self.rule_set.version).alias("version"),
                        F.array_compact(F.array(*candidates)).alias("rules"))
