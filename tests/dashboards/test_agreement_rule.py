"""The agreement rule between in-band and loadgen latency, on synthetic numbers."""

from __future__ import annotations

import types
from bisect import bisect_left

from appliance.observability.alert_latency import BUCKETS_MS
from loadgen.latency import LatencyRecorder

from support.dashboards.agreement import _bucket, agreement


def counts_for(values_ms: list[int]) -> list[int]:
    counts = [0] * (len(BUCKETS_MS) + 1)
    for v in values_ms:
        counts[bisect_left(BUCKETS_MS, v)] += 1
    return counts


def loadgen_report(values_ms: list[float], floor_p99: float = 1.0):
    rec = LatencyRecorder()
    for v in values_ms:
        rec.record(v, 0)
    return types.SimpleNamespace(latency_ms=rec.summary(), floor_ms={"p99": floor_p99},
                                 behind_schedule={"max_lag_ms": 0.0},
                                 latency_hdr=rec.encoded())


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


def test_recomputed_buckets_use_prometheus_le_bounds():
    # 0 ms is "the same millisecond" (le 0.5); a value on a bound belongs to that bucket
    assert [_bucket(v) for v in (0, 1, 2, 10, 11, 10000, 10001)] == [
        0, 1, 2, BUCKETS_MS.index(10), BUCKETS_MS.index(15), len(BUCKETS_MS) - 1,
        len(BUCKETS_MS)]
    # and agree with the observer's filing for every whole millisecond up to 12 s
    assert all(_bucket(v) == bisect_left(BUCKETS_MS, v) for v in range(12_000))
