"""The throughput bench's verdict per probe and its bounded search (no product started)."""

from __future__ import annotations

import pytest

from bench.appliance_throughput import SMOKE, Limits, Probe, judge, search

LIMITS = Limits(seconds=20, tail_s=5, bound_ms=1000, start=1000, max_rate=64_000, steps=3)


def _result(p99_by_second: list[float], sent: int = 20_000, late: int = 0,
            lost: int = 0, send_s: float = 20.0) -> dict:
    per_second = [{"second": s, "count": 10, "p50": v / 2, "p99": v, "max": v}
                  for s, v in enumerate(p99_by_second)]
    return {"sent": sent, "sent_late_over_1ms": late, "alerts_lost": lost, "send_s": send_s,
            "latency_ms": {"p99": max(p99_by_second)}, "per_second": per_second}


def test_a_startup_tail_that_drains_is_sustained():
    p = judge(1000, _result([3000, 900] + [5] * 18), LIMITS)
    assert p.sustained and p.why == "" and p.tail_p99_ms == 5


def test_a_growing_backlog_is_not():
    p = judge(1000, _result([100 * s for s in range(20)]), LIMITS)
    assert not p.sustained and "lag not bounded: p99 1900 ms" in p.why


def test_a_lost_alert_or_a_failed_run_is_not():
    assert "1 alerts lost" in judge(1000, _result([5] * 20, lost=1), LIMITS).why
    failed = judge(1000, {"error": "ready timed out"}, LIMITS)
    assert not failed.sustained and "ready timed out" in failed.why


def test_a_driver_that_fell_behind_voids_the_probe_and_late_sends_alone_do_not():
    p = judge(1000, _result([5] * 20, send_s=21.5), LIMITS)
    assert not p.sustained and p.driver_limited and "driver sent for 21.5 s" in p.why
    p = judge(1000, _result([5] * 20, late=8000, send_s=20.4), LIMITS)
    assert p.sustained and not p.driver_limited and p.late_share == 0.4


def _fake(capacity: int, driver_max: int = 10**9):
    asked: list[int] = []

    def probe(rate: int) -> Probe:
        asked.append(rate)
        return Probe(rate, rate <= capacity and rate <= driver_max, rate > driver_max, "",
                     None, None, None, None)
    return probe, asked


def test_search_doubles_then_bisects_within_its_bounds():
    probe, asked = _fake(capacity=11_000)
    probes = search(probe, LIMITS)
    assert asked == [1000, 2000, 4000, 8000, 16_000, 12_000, 10_000, 11_000]
    assert max(p.rate for p in probes if p.sustained) == 11_000


def test_search_stops_at_the_maximum_and_at_the_driver():
    probe, asked = _fake(capacity=10**9)
    search(probe, LIMITS)
    assert asked == [1000, 2000, 4000, 8000, 16_000, 32_000, 64_000]
    probe, asked = _fake(capacity=10**9, driver_max=5000)
    search(probe, LIMITS)
    assert asked == [1000, 2000, 4000, 8000]


def test_nothing_sustained_bisects_down_from_the_start():
    probe, asked = _fake(capacity=300)
    search(probe, LIMITS)
    assert asked == [1000, 500, 250, 375]


@pytest.mark.parametrize("argv", [["--tail", "10", "--seconds", "5"], ["--max", "1"],
                                  ["--steps", "-1"]])
def test_inconsistent_limits_exit_2_before_anything_runs(argv):
    from bench.appliance_throughput import main

    assert main(argv) == 2


def test_the_smoke_limits_are_small():
    assert SMOKE.seconds <= 10 and SMOKE.max_rate <= 4000 and SMOKE.steps == 0
