"""Open-loop timing math: offsets, totals, ramps and the split across workers."""

import math

import pytest

from loadgen.schedule import Schedule


def test_constant_rate_offsets_are_evenly_spaced():
    s = Schedule(rate=1000, duration=2.0)
    assert s.offset(0) == 0.0
    assert s.offset(1) == pytest.approx(0.001)
    assert s.offset(1500) == pytest.approx(1.5)
    assert s.total == 2000
    assert s.offset(s.total - 1) < 2.0 <= s.offset(s.total)


def test_total_counts_events_strictly_before_the_end():
    assert Schedule(rate=3, duration=1.0).total == 3  # offsets 0, 1/3, 2/3
    assert Schedule(rate=2.5, duration=1.0).total == 3  # offsets 0, 0.4, 0.8


def test_ramp_rises_linearly_then_holds():
    s = Schedule(rate=100, duration=10.0, ramp=4.0)
    # N(t) = rate t^2 / (2 ramp) during the ramp: 200 events by t = 4.
    assert s.due_by(4.0) == pytest.approx(200)
    assert s.offset(200) == pytest.approx(4.0)
    assert s.offset(50) == pytest.approx(2.0)  # a quarter of the ramp's events at half time
    # After the ramp, one event per 1/rate seconds.
    assert s.offset(300) - s.offset(299) == pytest.approx(0.01)
    assert s.total == 200 + 600
    # offset() inverts due_by() everywhere.
    for i in (1, 7, 199, 200, 201, 555):
        assert s.due_by(s.offset(i)) == pytest.approx(i)


def test_ramp_over_whole_duration():
    s = Schedule(rate=1000, duration=2.0, ramp=2.0)
    assert s.total == 1000  # the average rate over a full ramp is half the target
    assert s.offset(s.total - 1) < 2.0


def test_offsets_are_monotonic():
    s = Schedule(rate=777, duration=3.0, ramp=1.3)
    offsets = [s.offset(i) for i in range(s.total)]
    assert all(b > a for a, b in zip(offsets, offsets[1:], strict=False))


def test_workers_partition_the_indices_exactly():
    s = Schedule(rate=1001, duration=1.0)
    workers = 3
    seen = []
    for w in range(workers):
        n = s.worker_total(w, workers)
        seen.extend(s.worker_indices(w, workers, n))
    assert sorted(seen) == list(range(s.total))


@pytest.mark.parametrize("kwargs", [
    {"rate": 0, "duration": 1}, {"rate": -5, "duration": 1}, {"rate": math.inf, "duration": 1},
    {"rate": 10, "duration": 0}, {"rate": 10, "duration": 1, "ramp": 2},
    {"rate": 10, "duration": 1, "ramp": -1},
])
def test_rejects_impossible_schedules(kwargs):
    with pytest.raises(ValueError):
        Schedule(**kwargs)
