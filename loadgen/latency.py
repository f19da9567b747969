"""Latency accounting: one HDR histogram in microseconds, plus a per-second series.

Latency is measured from the event's *scheduled* send time, so a stall anywhere (the
generator itself included) shows up in every event scheduled during it: that is what
keeps the numbers free of coordinated omission. The per-second series is keyed by the
second of the schedule an event belongs to, so a stall appears where it happened.
"""

from __future__ import annotations

import math
from array import array

from hdrh.histogram import HdrHistogram

LOWEST_US = 1
HIGHEST_US = 3_600_000_000  # one hour
SIGNIFICANT_DIGITS = 3
SUMMARY_PERCENTILES = {"p50": 50.0, "p90": 90.0, "p99": 99.0, "p999": 99.9}
# Percentiles for the percentile-curve plot: 0, 50, 75, 87.5, ... towards 99.999.
CURVE_PERCENTILES = tuple(100.0 * (1 - 0.5**k) for k in range(0, 18)) + (99.999, 100.0)


class LatencyRecorder:
    def __init__(self) -> None:
        self.histogram = HdrHistogram(LOWEST_US, HIGHEST_US, SIGNIFICANT_DIGITS)
        self._per_second: dict[int, array] = {}

    def record(self, latency_ms: float, second: int) -> None:
        """Record one latency; ``second`` is the schedule second the event belongs to."""
        us = min(max(int(round(latency_ms * 1000.0)), LOWEST_US), HIGHEST_US)
        self.histogram.record_value(us)
        bucket = self._per_second.get(second)
        if bucket is None:
            bucket = self._per_second[second] = array("d")
        bucket.append(latency_ms)

    @property
    def count(self) -> int:
        return self.histogram.get_total_count()

    def percentile_ms(self, percentile: float) -> float:
        return self.histogram.get_value_at_percentile(percentile) / 1000.0

    def summary(self) -> dict[str, float | int | None]:
        """``count``, ``min``, ``mean``, ``p50`` .. ``p999`` and ``max`` in milliseconds."""
        if self.count == 0:
            return {"count": 0, "min": None, "mean": None, "max": None,
                    **{k: None for k in SUMMARY_PERCENTILES}}
        out: dict[str, float | int | None] = {
            "count": self.count,
            "min": self.histogram.get_min_value() / 1000.0,
            "mean": round(self.histogram.get_mean_value() / 1000.0, 3),
        }
        for name, p in SUMMARY_PERCENTILES.items():
            out[name] = self.percentile_ms(p)
        out["max"] = self.histogram.get_max_value() / 1000.0
        return out

    def count_at_least(self, latency_ms: float) -> int:
        """How many latencies are >= ``latency_ms`` (to HDR precision)."""
        threshold = int(latency_ms * 1000)
        below = sum(
            item.count_added_in_this_iter_step
            for item in self.histogram.get_recorded_iterator()
            if item.value_iterated_to < threshold
        )
        return self.count - below

    def curve(self) -> list[list[float]]:
        """``[percentile, latency_ms]`` pairs for the percentile plot."""
        if self.count == 0:
            return []
        return [[p, self.percentile_ms(p)] for p in CURVE_PERCENTILES]

    def series(self) -> list[dict[str, float | int]]:
        """Per schedule second: ``second``, ``count``, ``p50``, ``p99``, ``max`` (ms)."""
        rows = []
        for second in sorted(self._per_second):
            values = sorted(self._per_second[second])
            rows.append({
                "second": second,
                "count": len(values),
                "p50": round(_nearest_rank(values, 50.0), 3),
                "p99": round(_nearest_rank(values, 99.0), 3),
                "max": round(values[-1], 3),
            })
        return rows

    def encoded(self) -> str:
        """The histogram in the standard compressed HDR interchange form (base64)."""
        return self.histogram.encode().decode("ascii")


def decode_histogram(encoded: str) -> HdrHistogram:
    return HdrHistogram.decode(encoded.encode("ascii"))


def _nearest_rank(sorted_values: list[float], percentile: float) -> float:
    rank = max(1, math.ceil(percentile / 100.0 * len(sorted_values)))
    return sorted_values[rank - 1]
