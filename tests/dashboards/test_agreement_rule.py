"""The agreement rule between in-band and loadgen latency, on synthetic numbers."""

from __future__ import annotations

import types
from bisect import bisect_left

from agreement import agreement

from appliance.observability.alert_latency import BUCKETS_MS
from loadgen.latency import LatencyRecorder


def counts_for(values_ms: list[int]) -> list[int]:
    counts = [0] * (len(BUCKETS_MS) + 1)
    for v in values_ms:
        counts[bisect_left(BUCKETS_MS, v)] += 1
    return counts


def loadgen_report(values_ms: list[float], floor_p99: float = 1.0,
                   delivery_max_ms: float | None = None):
    rec = LatencyRecorder()
    for v in values_ms:
        rec.record(v, 0)
    return types.SimpleNamespace(latency_ms=rec.summary(), floor_ms={"p99": floor_p99},
                                 behind_schedule={"max_lag_ms": 0.0},
                                 latency_hdr=rec.encoded(), delivery_max_ms=delivery_max_ms)


def test_same_alerts_one_ms_apart_agree():
    loadgen = [3.0 + i % 5 for i in range(200)]
    inband = [int(v) - 1 for v in loadgen]
    assert agreement(counts_for(inband), loadgen_report(loadgen), 200).ok


def test_in_band_later_than_what_loadgen_saw_is_refused():
    loadgen = [3.0] * 200
    inband = [3] * 195 + [35] * 5  # five alerts in-band says were late, loadgen did not
    result = agreement(counts_for(inband), loadgen_report(loadgen), 200)
    assert not result.not_above and not result.ok


def test_late_duplicates_are_allowed_for_as_many_extra_records():
    loadgen = [3.0] * 200
    inband = [3] * 200 + [35] * 3  # three re-written alerts loadgen dropped as duplicates
    assert agreement(counts_for(inband), loadgen_report(loadgen), 200).ok
    assert not agreement(counts_for(inband + [35]), loadgen_report(loadgen), 201).ok


def test_in_band_far_below_loadgen_is_refused():
    loadgen = [40.0] * 200
    inband = [1] * 200  # loadgen's floor is 1 ms: 39 ms cannot be the instrument
    result = agreement(counts_for(inband), loadgen_report(loadgen), 200)
    assert result.not_above and not result.not_far_below and not result.ok


def test_measured_delivery_sets_the_slack_not_the_floor():
    loadgen = [40.0] * 200
    inband = [1] * 200
    # the run measured alerts taking up to 45 ms from their Kafka timestamp to loadgen:
    # that, not the quiet floor, is how far below loadgen in-band may honestly be
    assert agreement(counts_for(inband), loadgen_report(loadgen, delivery_max_ms=45.0),
                     200).ok
    # a quick delivery leaves the gap unexplained, whatever the floor said
    result = agreement(counts_for(inband),
                       loadgen_report(loadgen, floor_p99=30.0, delivery_max_ms=2.0), 200)
    assert not result.not_far_below
