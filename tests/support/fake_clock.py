"""A clock the test moves by hand, for code that takes ``clock=`` (a monotonic seconds
function): restart budgets, the epoch watch, the broker's connection rate."""

from __future__ import annotations


class FakeClock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now
