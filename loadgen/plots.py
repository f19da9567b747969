"""The report PNG: the latency percentile curve and latency over the run (matplotlib, Agg)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402


def write_png(report, path: str | Path) -> None:
    fig, (curve_ax, time_ax) = plt.subplots(1, 2, figsize=(12, 4.5))
    try:
        _curve(curve_ax, report.latency_curve)
        _over_time(time_ax, report.latency_series)
        fig.suptitle(f"{report.run_id} ({report.mode}): {report.target_rate:g} events/s, "
                     f"sent {report.sent:,}, lost {report.lost:,}")
        fig.tight_layout()
        fig.savefig(path, dpi=90)
    finally:
        plt.close(fig)


def _curve(ax, curve: list) -> None:
    ax.set_title("Latency by percentile")
    ax.set_ylabel("ms")
    if not curve:
        ax.text(0.5, 0.5, "no latencies recorded", ha="center", transform=ax.transAxes)
        return
    # x = 1 / (1 - p): each "nine" gets the same width.
    points = [(1.0 / max(1.0 - p / 100.0, 1e-6), ms) for p, ms in curve]
    ax.plot([x for x, _ in points], [ms for _, ms in points], marker=".")
    ax.set_xscale("log")
    ticks = [2, 10, 100, 1000, 10000, 100000]
    ax.set_xticks(ticks, ["50%", "90%", "99%", "99.9%", "99.99%", "99.999%"])
    ax.set_xlabel("percentile")
    ax.grid(True, which="both", alpha=0.3)


def _over_time(ax, series: list) -> None:
    ax.set_title("Latency over the run (by scheduled second)")
    ax.set_ylabel("ms")
    ax.set_xlabel("second of the schedule")
    if not series:
        ax.text(0.5, 0.5, "no latencies recorded", ha="center", transform=ax.transAxes)
        return
    seconds = [row["second"] for row in series]
    for key in ("p50", "p99", "max"):
        ax.plot(seconds, [row[key] for row in series], label=key, marker=".")
    ax.set_yscale("log")
    ax.legend()
    ax.grid(True, which="both", alpha=0.3)
