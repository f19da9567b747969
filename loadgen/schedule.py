"""Open-loop timing math: when event ``i`` is due, however fast anything answers.

The rate ramps linearly from 0 to ``rate`` over the first ``ramp`` seconds, then holds.
So the number of events due by offset ``t`` is

    N(t) = rate * t**2 / (2 * ramp)            for t <= ramp
    N(t) = rate * ramp / 2 + rate * (t - ramp)  for t >  ramp

and event ``i`` (counting from 0) is due at the offset where ``N(t) = i``. The run holds
every event with offset < ``duration``. Workers split the stream by index (``i % workers``)
so each keeps the same timing math and none waits for another.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Schedule:
    rate: float
    duration: float
    ramp: float = 0.0

    def __post_init__(self) -> None:
        if not (self.rate > 0 and math.isfinite(self.rate)):
            raise ValueError("rate must be a positive number of events per second")
        if not (self.duration > 0 and math.isfinite(self.duration)):
            raise ValueError("duration must be a positive number of seconds")
        if not 0 <= self.ramp <= self.duration:
            raise ValueError("ramp must be between 0 and the duration")

    def due_by(self, t: float) -> float:
        """N(t): how many events are due in ``[0, t]`` (fractional)."""
        if t <= 0:
            return 0.0
        if t <= self.ramp:
            return self.rate * t * t / (2 * self.ramp)
        return self.rate * self.ramp / 2 + self.rate * (t - self.ramp)

    def offset(self, i: int) -> float:
        """Seconds after the start at which event ``i`` is due."""
        ramp_events = self.rate * self.ramp / 2
        if i <= ramp_events and self.ramp > 0:
            return math.sqrt(2 * self.ramp * i / self.rate)
        return self.ramp + (i - ramp_events) / self.rate

    @property
    def total(self) -> int:
        """Events in the run: every ``i`` with ``offset(i) < duration``."""
        n = math.ceil(self.due_by(self.duration) - 1e-9)
        while n > 0 and self.offset(n - 1) >= self.duration:
            n -= 1
        while self.offset(n) < self.duration:
            n += 1
        return n

    def worker_indices(self, worker: int, workers: int, sent: int) -> range:
        """The first ``sent`` indices of ``worker`` (each worker sends in index order)."""
        return range(worker, worker + sent * workers, workers)

    def worker_total(self, worker: int, workers: int) -> int:
        return len(range(worker, self.total, workers))
