"""``bench.rules_throughput``'s verdicts and bounds, without a JVM: a step is sustained only
when the median p99 of its last seconds stays within twice the cell's own baseline, no
alert is lost and the driver kept its schedule; the ladder and its time bound are known
before anything runs; each count is set against one rule's rate."""

from __future__ import annotations

from bench.rules_throughput import (
    Ladder,
    Step,
    climb,
    judge,
    main,
    markdown,
    summarize,
    with_ratios,
)

LADDER = Ladder(baseline_s=40.0, settle_s=20.0, start=10_000, factor=1.5, steps=4,
                step_s=20.0, tail_s=10.0)


def _result(p99_by_second, lost: int = 0, send_s: float = 20.0) -> dict:
    return {"per_second": [{"second": s, "count": 100, "p99": p} for s, p in
                           enumerate(p99_by_second)],
            "send_s": send_s, "alerts_lost": lost}


def test_the_baseline_is_the_median_p99_after_the_settling_seconds():
    base = judge(5_000, _result([500.0] * 20 + [6.0] * 19 + [90.0], send_s=40.0), LADDER,
                 None)
    assert base.sustained and base.p99_ms == 6.0


def test_a_step_within_twice_the_baseline_is_sustained_and_one_over_it_is_not():
    # The step's first seconds (a new driver's rate reaching the query) are not judged.
    assert judge(15_000, _result([80.0] * 10 + [11.0] * 10), LADDER, 12.0).sustained
    over = judge(22_000, _result([8.0] * 10 + [13.0] * 10), LADDER, 12.0)
    assert not over.sustained and "over 12" in over.why


def test_lost_alerts_or_a_late_driver_fail_a_step_whatever_its_p99():
    assert not judge(10_000, _result([5.0] * 20, lost=2), LADDER, 12.0).sustained
    late = judge(10_000, _result([5.0] * 20, send_s=23.0), LADDER, 12.0)
    assert not late.sustained and "driver sent for 23" in late.why


def test_the_ladder_and_its_bound_are_known_up_front():
    assert LADDER.rates() == [10_000, 15_000, 22_000, 34_000]
    assert LADDER.rates_down() == [7_000]  # above the 5,000/s baseline only
    assert Ladder(start=40_000, factor=2.0, steps=2).rates_down() == [20_000, 10_000]
    assert 0 < LADDER.bound_s() < 600


def _edge(edge: int):
    """An ``attempt`` that sustains every rate up to ``edge``, and the rates it was asked."""
    asked: list[int] = []

    def attempt(rate: int) -> Step:
        asked.append(rate)
        ok = rate <= edge
        return Step(rate, ok, 5.0, 0, 20.0, "" if ok else "p99 over")
    return attempt, asked


def test_the_ladder_climbs_to_its_first_failed_step_and_no_further():
    attempt, asked = _edge(20_000)
    steps = climb(LADDER, attempt)
    assert asked == [10_000, 15_000, 22_000]
    assert [s.sustained for s in steps] == [True, True, False]
    attempt, asked = _edge(10**9)
    assert [s.rate for s in climb(LADDER, attempt)] == LADDER.rates()  # the top: no failure


def test_a_failed_first_step_steps_down_until_one_is_sustained():
    ladder = Ladder(start=40_000, factor=2.0, steps=3)
    attempt, asked = _edge(12_000)
    steps = climb(ladder, attempt)
    assert asked == [40_000, 20_000, 10_000]
    assert max(s.rate for s in steps if s.sustained) == 10_000
    attempt, asked = _edge(6_000)  # below every step: tried down to the baseline's rate
    assert [s.sustained for s in climb(ladder, attempt)] == [False, False, False]
    assert asked == [40_000, 20_000, 10_000]


def test_each_count_is_a_ratio_to_one_rules_rate_in_its_trigger():
    cells = [{"trigger": "continuous", "rules": 1, "max_sustained": 51_000},
             {"trigger": "continuous", "rules": 10_000, "max_sustained": 22_000},
             {"trigger": "realtime", "rules": 10_000, "max_sustained": None}]
    out = with_ratios(cells)
    assert [c["ratio_to_one_rule"] for c in out] == [1.0, 0.43, None]
    assert [c["target_met"] for c in out] == [None, False, None]


def _run(best, ready, p99, failed_at=None):
    over = "p99 9 ms over 8 ms"
    steps = [{"rate": best or 10_000, "sustained": best is not None,
              "why": "" if best else over}]
    if failed_at:
        steps.append({"rate": failed_at, "sustained": False, "why": over})
    return {"trigger": "realtime", "rules": 1000, "ready_s": ready, "max_sustained": best,
            "baseline": {"p99_ms": p99}, "p99_bound_ms": 2 * p99, "steps": steps}


def test_a_cell_of_several_runs_is_their_median_and_keeps_each_run():
    runs = [_run(15_000, 12.0, 3.0, 22_000), _run(None, 14.0, 4.0),
            _run(22_000, 13.0, 3.5, 34_000)]
    cell = summarize(runs)
    assert (cell["max_sustained"], cell["ready_s"], cell["baseline"]["p99_ms"],
            cell["p99_bound_ms"]) == (15_000, 13.0, 3.5, 7.0)
    assert cell["runs"] == runs
    # a run with no sustained step counts as 0: two of three failing leave no figure
    assert summarize([_run(None, 12.0, 3.0), _run(None, 12.0, 3.0),
                      _run(51_000, 12.0, 3.0)])["max_sustained"] is None
    assert summarize([_run(15_000, 12.0, 3.0), _run(22_000, 12.0, 3.0)])[
        "max_sustained"] == 15_000  # an even count: the lower median
    row = markdown({"command": "c", "note": "n", "cells": with_ratios([cell])}).splitlines()[-1]
    assert "15,000 (runs: 15,000, 0, 22,000)" in row
    assert ("22,000/s: p99 9 ms over 8 ms; 10,000/s: p99 9 ms over 8 ms; "
            "34,000/s: p99 9 ms over 8 ms |") in row


def test_one_run_is_the_cell_itself():
    run = _run(34_000, 11.0, 4.1, 51_000)
    assert summarize([run]) == {**run, "runs": [run]}


def test_inconsistent_options_are_refused_before_anything_runs(capsys):
    assert main(["--factor", "1"]) == 2
    assert "factor > 1" in capsys.readouterr().err
    assert main(["--runs", "0"]) == 2
