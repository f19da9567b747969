"""When is a rules swap an outage? The rule test_rules_reload.py asserts, kept apart so
test_swap_outage_rule.py can show it fails on bad data.

An outage is a wait like a restart's: a process restarted for new rules answers nothing
until it is ready again, and what that costs is measured in the same run, on the same
machine: the appliance's own ``startup_s`` (its ``appliance.ready`` line; 9-10 s to the
first alert on a quiet 2-core machine, 15-16 s with one core kept busy). So the longest
wait of an event around the swap may exceed the run's steady p99 (the machine's noise
before the swap) by a third of that start-up at most, and never by less than
``FLOOR_S``. A fixed bound failed on a machine with one core kept busy (the real-time
swap's wait for its batch boundary stretched to 3 s with everything else), which is a
slower machine, not an outage; the swap's millisecond cost is ``make bench``'s figure.
"""

from __future__ import annotations

FLOOR_S = 3.0
SHARE_OF_RESTART = 1 / 3


def outage_bound_s(startup_s: float) -> float:
    """The most an event around the swap may wait beyond the steady p99."""
    return max(FLOOR_S, startup_s * SHARE_OF_RESTART)


def is_outage(longest_wait_s: float, steady_p99_s: float, startup_s: float) -> bool:
    return longest_wait_s > steady_p99_s + outage_bound_s(startup_s)
