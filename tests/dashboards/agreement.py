"""Does the in-band alert latency histogram agree with the load generator's percentiles?

Tolerance, and why: the two clocks start and stop at different points of the same path.
loadgen:  event's scheduled send time -> alert consumed by its collector.
in-band:  event record's Kafka timestamp -> alert record's Kafka timestamp (whole ms).
So in-band excludes (a) producer scheduling delay, (b) the alert's produce ack and the
fetch that delivers it to a consumer, and both sides carry ms rounding of Kafka
timestamps. Two checks follow, one per direction:

- *Not above.* For one alert, in-band <= loadgen + 1 ms (rounding). So every in-band
  observation in a bucket that starts above loadgen's p99 + 1 ms is an alert loadgen also
  saw above its p99, or an extra record loadgen did not time (a duplicate alert: in-band
  sees every alert record, loadgen times the first of each id). The check counts: in-band
  observations above p99 + 1 ms <= loadgen's count above p99 + extra records. Counting,
  not comparing two p99s, because at the few hundred alerts of a test run a p99 is the
  second-largest value and one duplicate moves the rank.
- *Not far below.* The in-band p99's bucket [lower, upper] must reach down to loadgen p99 -
  slack: for one alert, in-band is below loadgen by its event's lateness against the
  schedule plus its alert's delivery (the alert record's Kafka timestamp -> consumed by
  loadgen), which loadgen measures for every alert of the run (``delivery_max_ms``).
  slack = max delivery + max schedule lag + 5 ms (ms rounding of both timestamps, and the
  producer's stamp after its send() call). Only a report without it falls back to the
  floor phase's estimate, 2 x floor p99: the floor ran before the appliance was busy, and
  a micro-batch's burst of CPU once delayed two alerts' delivery 70 ms past it.
"""

from __future__ import annotations

from dataclasses import dataclass

from appliance.observability.alert_latency import BUCKETS_MS
from loadgen.latency import decode_histogram


@dataclass(frozen=True)
class Agreement:
    inband_lower_ms: float
    inband_upper_ms: float
    loadgen_p99_ms: float
    slack_ms: float
    inband_total: int = 0
    inband_above: int = 0      # in-band observations in buckets above loadgen p99 + 1 ms
    loadgen_above: int = 0     # loadgen latencies above its p99
    extra_records: int = 0     # in-band observations loadgen did not time (duplicates)

    @property
    def not_above(self) -> bool:
        return self.inband_above <= self.loadgen_above + self.extra_records

    @property
    def not_far_below(self) -> bool:
        return self.inband_upper_ms >= self.loadgen_p99_ms - self.slack_ms

    @property
    def ok(self) -> bool:
        return self.not_above and self.not_far_below


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


def agreement(counts: list[int], report, received: int) -> Agreement:
    """``counts``: in-band per-bucket counts (+Inf last); ``report``: loadgen's report
    (``latency_ms``, ``floor_ms``, ``behind_schedule``, ``latency_hdr``); ``received``:
    the alerts loadgen timed (first arrival of each id)."""
    lower, upper = p99_bucket(counts)
    p99 = report.latency_ms["p99"]
    delivery = getattr(report, "delivery_max_ms", None)
    if delivery is None:
        delivery = 2 * ((report.floor_ms or {}).get("p99") or 0.0)
    lag = (report.behind_schedule or {}).get("max_lag_ms") or 0.0
    starts = (0.0, *BUCKETS_MS)  # lower bound of each bucket, +Inf's is the last bound
    above = sum(c for start, c in zip(starts, counts, strict=True) if start > p99 + 1.0)
    hdr = decode_histogram(report.latency_hdr)
    loadgen_above = hdr.get_total_count() - sum(
        item.count_added_in_this_iter_step for item in hdr.get_recorded_iterator()
        if item.value_iterated_to <= hdr.get_value_at_percentile(99.0))
    return Agreement(lower, upper, p99, delivery + lag + 5.0, inband_total=sum(counts),
                     inband_above=above, loadgen_above=loadgen_above,
                     extra_records=max(0, sum(counts) - received))
