"""Per-rule visibility without a series per rule: the summaries of the rule book's counts,
the metrics they become (top k only) and the page ``appliance rules stats`` reads. The
counts themselves come from a running query (tests/faults/test_rules_reload.py, and on a
cluster tests/cluster/test_cluster_appliance.py)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from appliance.observability.rules_metrics import RulesCollector
from appliance.rules.book_stats import BookStats, RuleCounts, report

STATS = BookStats(version="v1", events=1000, frontier=7, rules=(
    RuleCounts("cpu-hot", evaluated=400, matched=40, index_key="metric"),
    RuleCounts("mem-hot", evaluated=300, matched=90, index_key="metric"),
    RuleCounts("typo", evaluated=0, matched=0, index_key="metric"),     # nobody sends it
    RuleCounts("any-high", evaluated=1000, matched=0, index_key=None),  # residual
    RuleCounts("disk-hot", evaluated=300, matched=40, index_key="metric"),
))


def test_the_three_questions_an_operator_asks():
    assert [r.id for r in STATS.top(2)] == ["mem-hot", "cpu-hot"]   # ties by id
    assert [r.id for r in STATS.top(10)] == ["mem-hot", "cpu-hot", "disk-hot"]
    assert [r.id for r in STATS.unmatched()] == ["typo", "any-high"]
    assert [r.id for r in STATS.unreached()] == ["typo"]  # a residual rule is always reached
    assert STATS.rules_per_event == 2.0
    assert BookStats(version="v", events=0, frontier=-1, rules=STATS.rules).unreached() == []


def test_the_page_round_trips_and_reads_as_a_report():
    page = STATS.page(2)
    assert [r["id"] for r in page["top"]] == ["mem-hot", "cpu-hot"]
    assert page["unreached"] == [{"id": "typo", "evaluated": 0, "matched": 0,
                                  "index_key": "metric"}]
    assert BookStats.from_page(page) == STATS
    text = report(STATS, 2)
    assert text.splitlines()[0] == ("rules version v1: 5 rules, 1000 valid events evaluated, "
                                    "2.00 rules tried per event")
    assert "never matched: 2 rules: typo, any-high" in text
    assert "  typo (indexed by metric)" in text


def test_only_the_top_k_rules_get_a_series():
    collector = RulesCollector("v1", 5, stats=lambda: STATS, top_rules=2)
    registry = CollectorRegistry()
    registry.register(collector)
    text = generate_latest(registry).decode()
    series = [line for line in text.splitlines() if line.startswith("appliance_rule_alerts_total")]
    assert series == ['appliance_rule_alerts_total{rule="mem-hot"} 90.0',
                      'appliance_rule_alerts_total{rule="cpu-hot"} 40.0']
    assert "appliance_rules_unmatched 2.0" in text
    assert "appliance_rules_unreached 1.0" in text
    assert "appliance_rule_evaluations_total 2000.0" in text
    assert "appliance_rule_events_total 1000.0" in text


def test_a_jvm_that_stops_answering_keeps_the_last_counts():
    answers = [STATS]

    def stats():
        if not answers:
            raise RuntimeError("py4j: the JVM went away")
        return answers.pop()

    collector = RulesCollector("v1", 5, stats=stats, top_rules=2)
    assert collector.book_stats() == STATS
    collector._cached = (0.0, STATS)  # past the cache's time to live
    assert collector.book_stats() == STATS
