"""Which conjunct each rule is filed under (the rule book's index), read back from the book.

Skipping a rule for an event is exact only under the rules ``IndexChoice.java`` states: an
equality (or IN list, or OR of equalities on one key) on a plain string field or a tag,
compared byte for byte, no conjunct before it that could throw, and none after it either
where it can be NULL for an event it does not match (Spark's AND goes on past a NULL).
These cases pin each rule; the differential tests (test_rules_differential.py) prove the
outcomes equal.
"""

from __future__ import annotations

import pytest

from appliance.rules.rule_book import RuleBook, compile_rules
from appliance.rules.rules_file import Rule, RuleSet

pytestmark = pytest.mark.spark

CASES = [
    ("metric = 'cpu' AND value > 1", "metric"),
    ("'cpu' = metric", "metric"),
    ("value > 1 AND metric = 'cpu'", "metric"),            # comparisons cannot throw
    ("metric IN ('a', 'b')", "metric"),
    ("metric IN ('a', NULL)", "metric"),                    # NULL never equals
    ("(metric = 'a' OR metric = 'b') AND value > 1", "metric"),
    ("metric = 'a' OR source = 'b'", None),                 # two keys: no one bucket
    ("source = 'web-1' AND tags['env'] = 'prod'", "source"),
    ("tags['env'] = 'prod'", "tags['env']"),
    ("tags.env = 'prod' AND value > 1", "tags['env']"),
    ("source = 'a' AND metric = 'b'", "metric"),            # metric is preferred
    ("event_id = 'e-1'", "event_id"),
    ("metric <=> 'cpu'", "metric"),
    ("metric <=> NULL", None),
    ("lower(metric) = 'cpu'", None),                        # a function of the field
    ("metric LIKE 'cpu%'", None),
    ("NOT (metric = 'cpu')", None),
    ("value > 90", None),
    ("assert_true(value > 0) IS NULL AND metric = 'cpu'", None),  # it could throw first
    ("CAST(source AS INT) > 0 AND metric = 'cpu'", "metric"),     # ANSI off: cannot throw
    ("CAST(source AS DATE) IS NULL AND metric = 'cpu'", "metric"),
    # Casts to intervals throw whatever ANSI says (a bad string, an overflow).
    ("CAST(source AS INTERVAL DAY) IS NULL AND metric = 'cpu'", None),
    ("CAST(CAST(value AS BIGINT) AS INTERVAL DAY) > INTERVAL '1' DAY AND metric = 'cpu'", None),
    ("CAST(CAST(value AS INT) AS INTERVAL HOUR) + INTERVAL '1' HOUR IS NULL "
     "AND metric = 'cpu'", None),
    # A key that is false for other events stops Spark's AND; one that can be NULL does not.
    ("metric = 'cpu' AND assert_true(value > 0) IS NULL", "metric"),  # metric is required
    ("tags['env'] = 'prod' AND assert_true(value > 0) IS NULL", None),  # absent tag: NULL
    ("metric IN ('cpu', NULL) AND assert_true(value > 0) IS NULL", None),
    ("tags['env'] <=> 'prod' AND assert_true(value > 0) IS NULL", "tags['env']"),
    ("tags['env'] = 'prod' AND value > 1", "tags['env']"),
    ("CAST(metric AS INT) = 1", None),                      # a cast comparison, not bytes
]


def test_each_rule_is_filed_under_the_conjunct_it_can_be_skipped_by(sql_spark):
    rules = RuleSet.of([Rule(f"r{i}", "info", when, "m") for i, (when, _k) in
                        enumerate(CASES)])
    book = RuleBook.holding(sql_spark, rules)
    try:
        keys = [r.index_key for r in book.stats().rules]
    finally:
        book.close()
    assert [(when, key) for (when, _k), key in zip(CASES, keys, strict=True)] == CASES


#: Which conjuncts each rule's candidates are checked against before Spark's ``eval``
#: (``Threshold.java``): a double field against a constant, up to the first conjunct that
#: could throw (a threshold after it would skip Spark's throw; rules are deterministic).
THRESHOLDS = [
    ("metric = 'cpu' AND value > 1", "value > 1.0"),
    ("metric = 'cpu' AND 90 < value", "value > 90.0"),
    ("value >= 1 AND value < 5.5", "value >= 1.0 AND value < 5.5"),
    ("ts <= 0 AND metric = 'cpu'", "ts <= 0.0"),
    ("value >= -0.0", "value >= 0.0"),                           # Spark folds -0.0
    ("assert_true(value > 0) IS NULL AND value > 1", ""),        # it could throw first
    ("value > 1 AND assert_true(value > 0) IS NULL", "value > 1.0"),
    ("if(value > 1e3, raise_error('big'), true) AND value < 0", ""),
    ("CAST(value AS INT) > 1", ""),                               # not the field itself
    ("value = 1 AND metric = 'cpu'", ""),                         # not an ordering
    ("value > NULL", ""),
    ("metric > 'a'", ""),                                         # not a number
]


def test_each_rule_has_the_thresholds_that_may_decide_it_alone(sql_spark):
    rules = RuleSet.of([Rule(f"t{i}", "info", when, "m") for i, (when, _t) in
                        enumerate(THRESHOLDS)])
    got = compile_rules(sql_spark, rules).thresholds
    assert list(zip([w for w, _t in THRESHOLDS], got, strict=True)) == THRESHOLDS
