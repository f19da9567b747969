"""Does the in-band alert latency histogram agree with the load generator's percentiles?

Tolerance, and why: the two clocks start and stop at different points of the same path.
loadgen:  event's scheduled send time -> alert consumed by its collector.
in-band:  event record's Kafka timestamp -> alert record's Kafka timestamp (whole ms).
So in-band excludes (a) producer scheduling delay, (b) the alert's produce ack and the
fetch that delivers it to a consumer, and both sides carry ms rounding of Kafka
timestamps. The in-band p99 can therefore not be *above* loadgen's by more than 1 ms
(rounding), and can be *below* it by at most the instrument's own delivery time, which
loadgen measured in the same run as its floor (produce -> consume, no appliance), plus
how far the generator fell behind its schedule. The histogram only knows a bucket for its
p99: the check is that the bucket [lower, upper] containing the in-band p99 overlaps
[loadgen p99 - slack, loadgen p99 + 1 ms], slack = 2 x floor p99 + max schedule lag +
5 ms (2x and 5 ms absorb a scheduler hiccup of a shared CI machine between the floor
phase and the run).
"""

from __future__ import annotations

from dataclasses import dataclass

from appliance.alert_latency import BUCKETS_MS


@dataclass(frozen=True)
class Agreement:
    inband_lower_ms: float
    inband_upper_ms: float
    loadgen_p99_ms: float
    slack_ms: float

    @property
    def ok(self) -> bool:
        return (self.inband_lower_ms <= self.loadgen_p99_ms + 1.0
                and self.inband_upper_ms >= self.loadgen_p99_ms - self.slack_ms)


def p99_bucket(counts: list[int], q: float = 0.99) -> tuple[float, float]:
    """[lower, upper] ms of the bucket holding quantile ``q`` (per-bucket counts, +Inf last)."""
    total = sum(counts)
    assert total > 0, "the in-band histogram observed no alert"
    rank, cumulative = q * total, 0
    bounds = (0.0, *BUCKETS_MS, float("inf"))
    for i, count in enumerate(counts):
        cumulative += count
        if cumulative >= rank:
            return bounds[i], bounds[i + 1]
    return bounds[-2], bounds[-1]


def agreement(counts: list[int], report) -> Agreement:
    lower, upper = p99_bucket(counts)
    floor = (report.floor_ms or {}).get("p99") or 0.0
    lag = (report.behind_schedule or {}).get("max_lag_ms") or 0.0
    return Agreement(lower, upper, report.latency_ms["p99"], 2 * floor + lag + 5.0)
