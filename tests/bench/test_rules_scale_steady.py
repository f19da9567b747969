"""``bench.rules_scale``'s steady-state throughput verdict: a rate is sustained only if the
p99 of its last seconds stays within the bound (twice the count's own steady p99), besides
``judge``'s own conditions."""

from __future__ import annotations

from bench.appliance_throughput import Limits
from bench.rules_scale import steady_judge

LIMITS = Limits(seconds=30.0, tail_s=10)


def _result(p99_by_second, lost: int = 0) -> dict:
    return {"per_second": [{"second": s, "count": 100, "p99": p} for s, p in
                           enumerate(p99_by_second)],
            "sent": 3000, "sent_late_over_1ms": 0, "send_s": 30.0, "alerts_lost": lost,
            "latency_ms": {"p99": max(p99_by_second)}}


def test_a_rate_within_twice_the_steady_p99_is_sustained():
    # One slow second in the tail does not decide it: the tail's median does.
    p99s = [50.0] * 20 + [9.0] * 9 + [400.0]
    assert steady_judge(20_000, _result(p99s), LIMITS, bound_ms=14.0).sustained


def test_a_rate_whose_p99_doubles_is_not_sustained():
    verdict = steady_judge(40_000, _result([9.0] * 20 + [20.0] * 10), LIMITS, bound_ms=14.0)
    assert not verdict.sustained
    assert "over 14" in verdict.why


def test_lost_alerts_fail_it_whatever_the_p99():
    assert not steady_judge(1_000, _result([5.0] * 30, lost=3), LIMITS, bound_ms=14.0).sustained
