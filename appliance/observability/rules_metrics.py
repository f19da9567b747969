"""The rules metrics: which rules version runs, how reloads went, how long swaps took.

``appliance_rules_info{version}`` names the running rules (the content hash alerts carry
as ``rules_version``), so a dashboard can mark each change and an operator can match an
alert to the file that raised it; ``appliance_rules_reloads_total{result}`` counts reload
requests by outcome (every outcome starts at 0, so ``increase()`` sees the first one);
``appliance_rules_swap_seconds`` is the time from stopping the old query at its boundary
until its successor processes events: the time alerting waits during a swap.
"""

from __future__ import annotations

import threading
from bisect import bisect_left

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

#: Every outcome of a reload request (appliance.process.reload_status.ReloadResult).
RESULTS = ("applied", "unchanged", "rejected", "failed")
SWAP_BUCKETS_S = (0.05, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0, 30.0)


class RulesCollector:
    """prometheus-client collector; the runner tells it each version and reload."""

    def __init__(self, version: str, count: int):
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

    def collect(self):
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
            "time alerting waited during a rules swap: old query stopped to new one processing")
        swap.add_metric([], cumulative, swap_sum)
        yield swap
