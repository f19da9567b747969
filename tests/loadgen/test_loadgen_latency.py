"""HDR accounting: percentiles, counts above a threshold, the per-second series."""

import pytest

from loadgen.latency import LatencyRecorder, decode_histogram


def test_percentiles_of_a_known_distribution():
    rec = LatencyRecorder()
    for i in range(1, 1001):  # 1..1000 ms, one each
        rec.record(float(i), second=0)
    s = rec.summary()
    assert s["count"] == 1000
    assert s["p50"] == pytest.approx(500, rel=0.002)
    assert s["p90"] == pytest.approx(900, rel=0.002)
    assert s["p99"] == pytest.approx(990, rel=0.002)
    assert s["p999"] == pytest.approx(999, rel=0.002)
    assert s["max"] == pytest.approx(1000, rel=0.002)
    assert s["min"] == pytest.approx(1, rel=0.002)


def test_microsecond_resolution_for_sub_millisecond_latencies():
    rec = LatencyRecorder()
    rec.record(0.25, 0)
    rec.record(0.75, 0)
    assert rec.summary()["min"] == pytest.approx(0.25, abs=0.001)
    assert rec.summary()["max"] == pytest.approx(0.75, abs=0.001)


def test_negative_or_zero_latencies_are_clamped_not_lost():
    rec = LatencyRecorder()
    rec.record(-3.0, 0)  # clocks can disagree by a hair
    assert rec.count == 1
    assert rec.summary()["min"] == pytest.approx(0.001)


def test_count_at_least():
    rec = LatencyRecorder()
    for ms in [1, 2, 3, 700, 800, 1500]:
        rec.record(ms, 0)
    assert rec.count_at_least(750) == 2
    assert rec.count_at_least(2.5) == 4
    assert rec.count_at_least(0) == 6
    assert rec.count_at_least(2000) == 0


def test_series_groups_by_schedule_second():
    rec = LatencyRecorder()
    for ms in range(1, 101):
        rec.record(float(ms), second=0)
    rec.record(1500.0, second=3)
    rows = rec.series()
    assert [r["second"] for r in rows] == [0, 3]
    assert rows[0] == {"second": 0, "count": 100, "p50": 50.0, "p99": 99.0, "max": 100.0}
    assert rows[1]["max"] == 1500.0


def test_empty_summary_has_no_numbers():
    s = LatencyRecorder().summary()
    assert s["count"] == 0 and s["p99"] is None and s["max"] is None


def test_encoded_histogram_round_trips():
    rec = LatencyRecorder()
    for ms in (1.5, 2.5, 10.0):
        rec.record(ms, 0)
    h = decode_histogram(rec.encoded())
    assert h.get_total_count() == 3
    assert h.get_max_value() == pytest.approx(10_000, rel=0.001)


def test_curve_is_monotonic_up_to_max():
    rec = LatencyRecorder()
    for i in range(1, 5001):
        rec.record(i / 10.0, 0)
    curve = rec.curve()
    values = [ms for _, ms in curve]
    assert values == sorted(values)
    assert curve[-1][0] == 100.0 and values[-1] == pytest.approx(500, rel=0.002)
