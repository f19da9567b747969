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
