"""``appliance dashboards render``: each dashboard's panels as one PNG, from Prometheus.

For people without a Grafana (and CI reports): every panel's queries go to Prometheus'
``/api/v1/query_range`` over the chosen window, and matplotlib draws them the way the
panel kind suggests (lines for time series, a bucket heatmap, the last value for stats).
"""

from __future__ import annotations

import json
import math
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402

from dashboards import catalog  # noqa: E402

TIMEOUT_S = 15.0
_LEGEND = re.compile(r"\{\{\s*(\w+)\s*\}\}")


class RenderError(Exception):
    """Prometheus could not be queried (exit 1, one line)."""


@dataclass(frozen=True)
class Series:
    labels: dict[str, str]
    times: list[float]
    values: list[float]


def query_range(prometheus: str, expr: str, start: float, end: float,
                step_s: float) -> list[Series]:
    """One ``query_range`` call; NaN/Inf samples are kept (the plot skips them)."""
    params = urllib.parse.urlencode({"query": expr, "start": f"{start:.3f}",
                                     "end": f"{end:.3f}", "step": f"{step_s:g}"})
    url = f"{prometheus.rstrip('/')}/api/v1/query_range?{params}"
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response:
            doc = json.loads(response.read())
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode("utf-8", "replace")
        raise RenderError(f"Prometheus at {prometheus} rejected {expr!r} "
                          f"(HTTP {exc.code}): {' '.join(detail.split())[:200]}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise RenderError(f"Prometheus at {prometheus} is unreachable: {reason}") from None
    if doc.get("status") != "success":
        raise RenderError(f"Prometheus at {prometheus}: {doc.get('error', 'query failed')}")
    return [Series(item["metric"], [float(t) for t, _ in item["values"]],
                   [float(v) for _, v in item["values"]])
            for item in doc["data"]["result"]]


def legend(template: str, labels: dict[str, str]) -> str:
    if not template:
        return ",".join(f"{k}={v}" for k, v in sorted(labels.items()) if k != "__name__")
    return _LEGEND.sub(lambda m: labels.get(m.group(1), ""), template)


def _finite(series: Series) -> tuple[list[float], list[float]]:
    pairs = [(t, v) for t, v in zip(series.times, series.values, strict=True)
             if math.isfinite(v)]
    return [p[0] for p in pairs], [p[1] for p in pairs]


def _draw(ax, panel: catalog.Panel, data: list[tuple[catalog.Target, list[Series]]],
          start: float) -> None:
    ax.set_title(panel.title, fontsize=9)
    ax.tick_params(labelsize=7)
    if panel.kind == "stat":
        lines = []
        for target, series_list in data:
            for series in series_list:
                _t, values = _finite(series)
                if values:
                    lines.append(f"{legend(target.legend, series.labels)}: {values[-1]:.4g}")
        ax.axis("off")
        ax.text(0.5, 0.5, "\n".join(lines[:6]) or "no data", ha="center", va="center",
                fontsize=11, transform=ax.transAxes)
        return
    if panel.kind == "heatmap":
        rows = []
        for _target, series_list in data:
            for series in sorted(series_list, key=lambda s: float(s.labels.get("le", "inf"))):
                rows.append((series.labels.get("le", "?"), series))
        if rows:
            times = rows[0][1].times
            grid = [[v if math.isfinite(v) else 0.0 for v in s.values[:len(times)]]
                    for _le, s in rows]
            # Cumulative "le" buckets -> per-bucket counts.
            cells = [grid[0]] + [[max(0.0, b - a) for a, b in zip(lo, hi, strict=False)]
                                 for lo, hi in zip(grid, grid[1:], strict=False)]
            ax.imshow(cells, aspect="auto", origin="lower", cmap="viridis",
                      extent=(0, (times[-1] - start) if times else 1, 0, len(rows)))
            ax.set_yticks([i + 0.5 for i in range(len(rows))][::3])
            ax.set_yticklabels([le for le, _s in rows][::3], fontsize=6)
            ax.set_xlabel("seconds", fontsize=7)
        else:
            ax.text(0.5, 0.5, "no data", ha="center", transform=ax.transAxes)
        return
    drawn = 0
    for target, series_list in data:
        for series in series_list:
            times, values = _finite(series)
            if values:
                ax.plot([t - start for t in times], values, linewidth=1,
                        label=legend(target.legend, series.labels))
                drawn += 1
    for value in panel.lines:  # the panel's threshold lines (the latency target)
        ax.axhline(value, linestyle="--", linewidth=0.8, color="red",
                   label=f"threshold {value:g}")
    if drawn:
        ax.legend(fontsize=6, loc="upper left")
        ax.set_xlabel("seconds", fontsize=7)
        if panel.unit:
            ax.set_ylabel(panel.unit, fontsize=7)
    else:
        ax.text(0.5, 0.5, "no data", ha="center", transform=ax.transAxes)


def render_dashboard(board: catalog.Dashboard, prometheus: str, out_dir: Path,
                     window_s: float, step_s: float, end: float | None = None) -> Path:
    end = time.time() if end is None else end
    start = end - window_s
    panels = board.panels
    cols = 2
    rows = max(1, math.ceil(len(panels) / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(14, 3.2 * rows), squeeze=False)
    try:
        for index, panel in enumerate(panels):
            data = [(t, query_range(prometheus, catalog.expand(t.expr, step_s, window_s),
                                    start, end, step_s)) for t in panel.targets]
            _draw(axes[index // cols][index % cols], panel, data, start)
        for index in range(len(panels), rows * cols):
            axes[index // cols][index % cols].axis("off")
        fig.suptitle(f"{board.title} (last {window_s:g} s, step {step_s:g} s)", fontsize=12)
        fig.tight_layout()
        out_dir.mkdir(parents=True, exist_ok=True)
        path = out_dir / f"{board.uid}.png"
        fig.savefig(path, dpi=80)
    finally:
        plt.close(fig)
    return path


def render_all(prometheus: str, out_dir: Path, window_s: float, step_s: float,
               say=print) -> list[Path]:
    paths = []
    for board in catalog.load():
        path = render_dashboard(board, prometheus, out_dir, window_s, step_s)
        say(f"rendered {board.title!r}: {path}")
        paths.append(path)
    return paths
