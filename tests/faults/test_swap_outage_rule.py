"""The outage rule of test_rules_reload.py on made-up figures: it passes a slow swap on a
slow machine and fails a wait like a restart's on any machine."""

from support.faults.swap_outage import is_outage, outage_bound_s


def test_a_quiet_machines_swap_passes():
    # the bench's quiet-machine figures: 386-470 ms around the swap, start-up ~9 s
    assert not is_outage(0.47, steady_p99_s=0.003, startup_s=9.0)


def test_a_busy_machines_slow_swap_passes():
    # one core kept busy: real-time waited 4.33 s over a steady p99 of 113 ms, and the
    # appliance took 15-16 s to start in such runs
    assert not is_outage(4.33, steady_p99_s=0.113, startup_s=15.5)


def test_a_wait_like_a_restart_fails_whatever_the_machine():
    for startup_s in (9.0, 15.5, 40.0):
        assert is_outage(startup_s, steady_p99_s=0.1, startup_s=startup_s)
        assert is_outage(startup_s / 2, steady_p99_s=0.1, startup_s=startup_s)


def test_the_same_wait_is_an_outage_on_a_fast_machine():
    assert is_outage(4.33, steady_p99_s=0.113, startup_s=9.0)


def test_the_bound_never_drops_below_its_floor():
    assert outage_bound_s(0.5) == 3.0
    assert is_outage(3.2, steady_p99_s=0.1, startup_s=0.5)
    assert not is_outage(3.0, steady_p99_s=0.1, startup_s=0.5)
