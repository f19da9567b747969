"""The warm-up / steady-state split of a per-second latency series."""

from __future__ import annotations

from loadgen.steady import split_warmup


def test_warmup_and_steady_state_are_reported_apart():
    series = [{"second": s, "count": 100, "p99": 500.0 if s < 3 else 4.0 + s % 2}
              for s in range(21)]
    series.append({"second": 21, "count": 0, "p99": -1})  # a second without alerts
    split = split_warmup(series, warmup_s=5)
    assert split.warmup_worst_p99_ms == 500.0
    assert split.steady_p99_ms == 4.5 and split.steady_worst_p99_ms == 5.0


def test_a_run_shorter_than_the_warmup_has_no_steady_state():
    split = split_warmup([{"second": 0, "count": 3, "p99": 7.0}], warmup_s=15)
    assert (split.warmup_worst_p99_ms, split.steady_p99_ms) == (7.0, None)
    assert split_warmup([]).as_dict()["warmup_worst_p99_ms"] is None


def test_demo_summary_reports_warmup_apart_from_steady_state():
    from loadgen.demo import summary
    from loadgen.report import Report

    series = [{"second": s, "count": 50, "p50": 1.0, "p99": 300.0 if s == 0 else 3.0,
               "max": 400.0} for s in range(20)]
    report = Report(
        run_id="r", mode="alerts", bootstrap="b", topics={}, target_rate=100, ramp_s=0,
        duration_s=20, workers=1, scheduled=2000, sent=2000, send_failed=0,
        achieved_rate=100, alert_ratio=0.1, bad_ratio=0, expected_alerts=200,
        received_alerts=200, lost=0, duplicates=0, unexpected_alerts=0, dlq_expected=0,
        dlq_received=0, dlq_lost=0, dlq_duplicates=0, foreign_records=0,
        malformed_answers=0, floor_ms=None, latency_ms={"p50": 1.0, "p99": 250.0},
        behind_schedule={}, grace_s=0, started_at="", schedule_start_epoch=0.0,
        latency_series=series)
    lines = summary(report, "continuous").splitlines()
    assert lines[0].endswith("latency p50 1.0 ms, p99 250.0 ms")
    assert lines[1].strip() == "warm-up (first 15 s): worst per-second p99 300.0 ms"
    assert lines[2].strip() == "steady state: per-second p99 3.0 ms (median), 3.0 ms (worst)"
