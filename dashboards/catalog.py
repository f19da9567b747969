"""The committed dashboards, as data: names, panels, their PromQL, the datasource uid.

Shared by ``publish`` (uploads the JSON), ``render`` (queries each panel's expressions)
and the tests (every panel's queries must return data from a real Prometheus).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

DATASOURCE_UID = "appliance-prometheus"
DATASOURCE_TYPE = "prometheus"
# Panels name the dashboard's datasource variable, whose default is DATASOURCE_UID.
DATASOURCE_VARIABLE = "${datasource}"
# The instance variable's "All": every query selects instance=~"$instance".
INSTANCE_ALL = ".*"
# The latency target: LATENCY_OBJECTIVE of alerts within LATENCY_TARGET_S, read from the
# histogram's le=LATENCY_TARGET_LE bucket (the alert rules say the same numbers; a test
# keeps them in step with appliance.observability.alert_latency's buckets).
LATENCY_TARGET_S = 0.1
LATENCY_TARGET_LE = "0.1"
LATENCY_OBJECTIVE = 0.99
FOLDER_UID = "appliance"
FOLDER_TITLE = "Appliance"
PACKAGE_DIR = Path(str(resources.files("dashboards")))
JSON_DIR = PACKAGE_DIR / "json"
PROMETHEUS_DIR = PACKAGE_DIR / "prometheus"
PROVISIONING_DIR = PACKAGE_DIR / "grafana" / "provisioning"
# Grafana's query variables, expanded the way Grafana would for a given step.
_VARIABLE = re.compile(r"\$__(rate_interval|interval|range)\b"
                       r"|\$\{__(rate_interval|interval|range)\}")
_INSTANCE = re.compile(r"\$instance\b|\$\{instance\}")


@dataclass(frozen=True)
class Target:
    ref_id: str
    expr: str
    legend: str


@dataclass(frozen=True)
class Panel:
    title: str
    kind: str  # timeseries | heatmap | stat
    unit: str
    targets: tuple[Target, ...]
    # Values drawn as (dashed) threshold lines, e.g. the latency target.
    lines: tuple[float, ...] = ()


@dataclass(frozen=True)
class Dashboard:
    uid: str
    title: str
    path: Path
    panels: tuple[Panel, ...]

    def model(self) -> dict:
        return json.loads(self.path.read_text(encoding="utf-8"))


def load(json_dir: Path = JSON_DIR) -> list[Dashboard]:
    """Every dashboard in ``json_dir``, in file-name order."""
    out = []
    for path in sorted(json_dir.glob("*.json")):
        model = json.loads(path.read_text(encoding="utf-8"))
        panels = []
        for panel in model.get("panels", []):
            if panel.get("type") == "row":
                continue
            targets = tuple(Target(t.get("refId", ""), t["expr"], t.get("legendFormat", ""))
                            for t in panel.get("targets", []) if t.get("expr"))
            defaults = panel.get("fieldConfig", {}).get("defaults", {})
            style = defaults.get("custom", {}).get("thresholdsStyle", {}).get("mode", "off")
            lines = () if style == "off" else tuple(
                float(step["value"]) for step in defaults.get("thresholds", {}).get("steps", [])
                if step.get("value") is not None)
            panels.append(Panel(panel["title"], panel["type"], defaults.get("unit", ""),
                                targets, lines))
        out.append(Dashboard(model["uid"], model["title"], path, tuple(panels)))
    return out


def expand(expr: str, step_s: float, range_s: float, instance: str = INSTANCE_ALL) -> str:
    """Replace Grafana's ``$__rate_interval``/``$__interval``/``$__range`` for Prometheus,
    and the dashboards' ``$instance`` (a regex; default: All).

    ``$__rate_interval`` becomes max(4 x step, 15 s): like Grafana's rule (at least four
    scrape intervals), so that every rate window holds several samples.
    """
    rate = max(4 * step_s, 15.0)

    def repl(match: re.Match) -> str:
        name = match.group(1) or match.group(2)
        seconds = {"rate_interval": rate, "interval": max(step_s, 1.0),
                   "range": max(range_s, rate)}[name]
        return f"{int(round(seconds))}s"

    return _INSTANCE.sub(lambda _m: instance, _VARIABLE.sub(repl, expr))
