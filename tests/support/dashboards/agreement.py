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
- *Exactly what the records say.* The other direction is not a tolerance but an identity:
  every bucket count equals the count recomputed here from the alert records themselves
  (each record's Kafka timestamp minus the event timestamp its header carries), read back
  from the alerts topic after the run (``recomputed_counts``). A "not far below" bound on
  the p99 (loadgen p99 minus delivery and schedule slack) was tried first; on a busy host
  one late delivery moved it, and it could not tell a wrong histogram from a slow consumer.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from kafka import KafkaConsumer, TopicPartition

from appliance.observability.alert_latency import BUCKETS_MS
from appliance.query.alert_headers import SOURCE_TIMESTAMP_HEADER
from loadgen.latency import decode_histogram


@dataclass(frozen=True)
class Agreement:
    inband_lower_ms: float
    inband_upper_ms: float
    loadgen_p99_ms: float
    inband_total: int = 0
    inband_above: int = 0      # in-band observations in buckets above loadgen p99 + 1 ms
    loadgen_above: int = 0     # loadgen latencies above its p99
    extra_records: int = 0     # in-band observations loadgen did not time (duplicates)

    @property
    def not_above(self) -> bool:
        return self.inband_above <= self.loadgen_above + self.extra_records

    @property
    def ok(self) -> bool:
        return self.not_above


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
    starts = (0.0, *BUCKETS_MS)  # lower bound of each bucket, +Inf's is the last bound
    above = sum(c for start, c in zip(starts, counts, strict=True) if start > p99 + 1.0)
    hdr = decode_histogram(report.latency_hdr)
    loadgen_above = hdr.get_total_count() - sum(
        item.count_added_in_this_iter_step for item in hdr.get_recorded_iterator()
        if item.value_iterated_to <= hdr.get_value_at_percentile(99.0))
    return Agreement(lower, upper, p99, inband_total=sum(counts),
                     inband_above=above, loadgen_above=loadgen_above,
                     extra_records=max(0, sum(counts) - received))


def _bucket(latency_ms: int) -> int:
    """Index of the first bucket whose upper bound (``le``) holds ``latency_ms``."""
    for i, bound in enumerate(BUCKETS_MS):
        if latency_ms <= bound:
            return i
    return len(BUCKETS_MS)  # +Inf


def recomputed_counts(bootstrap: str, topic: str, timeout_s: float = 60.0) -> list[int]:
    """Per-bucket counts (+Inf last) of every alert record in ``topic``, from the records:
    Kafka timestamp minus the event timestamp in the record's header."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             consumer_timeout_ms=1000)
    try:
        parts = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic) or ()]
        assert parts, f"no partitions of {topic}"
        consumer.assign(parts)
        consumer.seek_to_beginning(*parts)
        ends = consumer.end_offsets(parts)
        counts = [0] * (len(BUCKETS_MS) + 1)
        deadline = time.monotonic() + timeout_s
        while any(consumer.position(tp) < ends[tp] for tp in parts):
            assert time.monotonic() < deadline, f"{topic} not read to its end in {timeout_s} s"
            for records in consumer.poll(timeout_ms=500).values():
                for record in records:
                    source = dict(record.headers or ()).get(SOURCE_TIMESTAMP_HEADER)
                    assert source is not None, f"alert without its event timestamp: {record}"
                    counts[_bucket(record.timestamp - int(source))] += 1
        return counts
    finally:
        consumer.close()


def counts_match_records(scrape, bootstrap: str, topic: str,
                         timeout_s: float = 60.0) -> tuple[list[int], list[int]]:
    """(scraped, recomputed): scraped again until its total reaches the records' (the
    observer may be a fetch behind) or ``timeout_s``; equal when the histogram is right."""
    expected = recomputed_counts(bootstrap, topic)
    deadline = time.monotonic() + timeout_s
    counts = scrape()
    while sum(counts) < sum(expected) and time.monotonic() < deadline:
        time.sleep(0.25)
        counts = scrape()
    return counts, expected
