"""The rules metrics: which rules version runs, how reloads went, how long swaps took.

``appliance_rules_info{version}`` names the running rules (the content hash alerts carry
as ``rules_version``), so a dashboard can mark each change and an operator can match an
alert to the file that raised it; ``appliance_rules_reloads_total{result}`` counts reload
requests by outcome (every outcome starts at 0, so ``increase()`` sees the first one);
``appliance_rules_swap_seconds`` is the time alerting waited per applied reload (none
where rules switch between epochs or batches; in real-time mode the running batch's end
until the next one runs).

Per rule, from the rule book's counts (``appliance.rules.book_stats``): with thousands of
rules a series per rule would swamp Prometheus, so ``appliance_rule_alerts_total{rule}``
exists for the ``[metrics] top_rules`` rules that alerted most (the set may change as
counts grow: a rule leaving it leaves a stale series, as any disappearing target does);
``appliance_rules_unmatched`` and ``appliance_rules_unreached`` count the rules that never
matched and those no event reached; ``appliance_rule_evaluations_total`` over
``appliance_rule_events_total`` is the rules evaluated per event, what the index saves.
Every rule's counts are on ``/-/rules/stats``.
"""

from __future__ import annotations

import threading
import time
from bisect import bisect_left
from collections.abc import Callable

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

from appliance.rules.book_stats import EMPTY, BookStats

#: Every outcome of a reload request (appliance.process.reload_status.ReloadResult).
RESULTS = ("applied", "unchanged", "rejected", "failed")
SWAP_BUCKETS_S = (0.05, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0, 30.0)
#: How long one read of the rule book's counts serves scrapes (it crosses into the JVM).
STATS_TTL_S = 1.0


class RulesCollector:
    """prometheus-client collector; a rules reload (``appliance.process.rules_swap``) tells
    it each version and reload."""

    def __init__(self, version: str, count: int,
                 stats: Callable[[], BookStats] | None = None, top_rules: int = 10):
        """``stats``: the rule book's per-rule counts (None: no per-rule metrics);
        ``top_rules``: how many rules get a per-rule alerts series."""
        self._stats = stats
        self._top_rules = top_rules
        self._cached: tuple[float, BookStats] = (float("-inf"), EMPTY)
        self._lock = threading.Lock()
        self._version = version
        self._count = count
        self._reloads = dict.fromkeys(RESULTS, 0)
        self._swap_buckets = [0] * len(SWAP_BUCKETS_S)
        self._swap_count = 0
        self._swap_sum = 0.0

    def running(self, version: str, count: int) -> None:
        with self._lock:
            self._version, self._count = version, count

    def reloaded(self, result: str) -> None:
        with self._lock:
            self._reloads[result] += 1

    def swapped(self, seconds: float) -> None:
        with self._lock:
            index = bisect_left(SWAP_BUCKETS_S, seconds)
            if index < len(self._swap_buckets):
                self._swap_buckets[index] += 1
            self._swap_count += 1
            self._swap_sum += seconds

    def book_stats(self) -> BookStats:
        """The rule book's counts, read at most every ``STATS_TTL_S`` (EMPTY without a book
        or when the JVM does not answer)."""
        if self._stats is None:
            return EMPTY
        read_at, cached = self._cached
        if time.monotonic() - read_at < STATS_TTL_S:
            return cached
        try:
            fresh = self._stats()
        except Exception:  # noqa: BLE001 - the JVM went away: the metrics say so elsewhere
            return cached
        self._cached = (time.monotonic(), fresh)
        return fresh

    def collect(self):
        yield from self._collect_reloads()
        if self._stats is not None:
            yield from self._collect_per_rule(self.book_stats())

    def _collect_per_rule(self, stats: BookStats):
        alerts = CounterMetricFamily(
            "appliance_rule_alerts", f"alerts listing the rule, for the {self._top_rules} "
            "rules that alerted most", labels=["rule"])
        for rule in stats.top(self._top_rules):
            alerts.add_metric([rule.id], float(rule.matched))
        yield alerts
        unmatched = GaugeMetricFamily("appliance_rules_unmatched",
                                      "rules that matched no event since start")
        unmatched.add_metric([], float(len(stats.unmatched())))
        yield unmatched
        unreached = GaugeMetricFamily(
            "appliance_rules_unreached", "indexed rules no event reached since start (none "
            "had the value they require)")
        unreached.add_metric([], float(len(stats.unreached())))
        yield unreached
        evaluations = CounterMetricFamily("appliance_rule_evaluations",
                                          "rule evaluations (rules tried, over all events)")
        evaluations.add_metric([], float(stats.evaluations))
        yield evaluations
        events = CounterMetricFamily("appliance_rule_events",
                                     "valid events the rules were evaluated on")
        events.add_metric([], float(stats.events))
        yield events

    def _collect_reloads(self):
        with self._lock:
            version, count = self._version, self._count
            reloads = dict(self._reloads)
            buckets, total, swap_sum = list(self._swap_buckets), self._swap_count, self._swap_sum
        info = GaugeMetricFamily("appliance_rules_info",
                                 "the rules version the query runs (1)", labels=["version"])
        info.add_metric([version], 1.0)
        yield info
        rules = GaugeMetricFamily("appliance_rules", "number of loaded alert rules")
        rules.add_metric([], float(count))
        yield rules
        counter = CounterMetricFamily("appliance_rules_reloads",
                                      "rules reload requests by outcome", labels=["result"])
        for result in RESULTS:
            counter.add_metric([result], float(reloads[result]))
        yield counter
        cumulative, running = [], 0
        for bound, hits in zip(SWAP_BUCKETS_S, buckets, strict=True):
            running += hits
            cumulative.append((repr(bound), float(running)))
        cumulative.append(("+Inf", float(total)))
        swap = HistogramMetricFamily(
            "appliance_rules_swap_seconds",
            "time alerting waited per applied rules reload (0 but in real-time mode)")
        swap.add_metric([], cumulative, swap_sum)
        yield swap
