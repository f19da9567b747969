"""Split a per-second latency series into the warm-up and the steady state.

A run's overall p99 mixes two different things: the first seconds after start (a fresh JVM,
first epochs, first batches) and the steady state an operator sees afterwards. Reporting
them apart shows which one a change moved. ``WARMUP_S`` is the window the first bench runs
showed the start-up tail to last (~15 s); it is a reporting boundary, not a tuning value.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass

WARMUP_S = 15


@dataclass(frozen=True)
class WarmupSplit:
    warmup_seconds: int                    # seconds [0, warmup_seconds) are the warm-up
    warmup_worst_p99_ms: float | None      # the worst per-second p99 in the warm-up
    steady_p99_ms: float | None            # median per-second p99 from then on
    steady_worst_p99_ms: float | None      # worst per-second p99 from then on

    def as_dict(self) -> dict:
        return asdict(self)


def split_warmup(series: Sequence[dict], warmup_s: int = WARMUP_S) -> WarmupSplit:
    """``series``: rows with ``second``, ``count`` and ``p99`` (ms), as loadgen's
    ``LatencyRecorder.series()`` and the bench driver write them. Empty seconds are skipped.
    """
    rows = [r for r in series if r.get("count", 0) > 0]
    early = [r["p99"] for r in rows if r["second"] < warmup_s]
    steady = [r["p99"] for r in rows if r["second"] >= warmup_s]
    return WarmupSplit(
        warmup_seconds=warmup_s,
        warmup_worst_p99_ms=max(early) if early else None,
        steady_p99_ms=round(statistics.median(steady), 3) if steady else None,
        steady_worst_p99_ms=max(steady) if steady else None,
    )
