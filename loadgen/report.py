"""The run report: one dataclass, written as JSON, a Markdown summary and a PNG.

JSON is the machine-readable truth; the Markdown and the PNG are derived from it, so
they can never disagree with it.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path


@dataclass
class Report:
    run_id: str
    mode: str  # "alerts" (through the appliance) or "floor" (the instrument alone)
    bootstrap: str
    topics: dict[str, str]
    target_rate: float
    ramp_s: float
    duration_s: float
    workers: int
    scheduled: int
    sent: int
    send_failed: int
    achieved_rate: float
    alert_ratio: float
    bad_ratio: float
    expected_alerts: int
    received_alerts: int
    lost: int
    duplicates: int
    unexpected_alerts: int
    dlq_expected: int
    dlq_received: int
    dlq_lost: int
    dlq_duplicates: int
    foreign_records: int
    malformed_answers: int  # alerts/dead letters this run could not parse
    floor_ms: dict | None
    latency_ms: dict
    behind_schedule: dict
    grace_s: float
    started_at: str
    schedule_start_epoch: float  # when event 0 was due (epoch seconds)
    latency_series: list = field(default_factory=list)
    latency_curve: list = field(default_factory=list)
    latency_hdr: str = ""
    notes: list[str] = field(default_factory=list)
    resent: int = 0  # deliveries re-sent because the broker did not acknowledge them
    # Longest time from an alert record's Kafka timestamp to its consumption here: the
    # delivery part of the latency, which an in-appliance clock does not see.
    delivery_max_ms: float | None = None

    @property
    def ok(self) -> bool:
        """Every expected alert and dead letter arrived."""
        return self.lost == 0 and self.dlq_lost == 0

    def to_dict(self) -> dict:
        return asdict(self)


def write_reports(report: Report, json_path: str | Path) -> dict[str, Path]:
    """Write FILE.json, FILE.md and FILE.png side by side; returns their paths."""
    from loadgen.plots import write_png

    json_path = Path(json_path)
    json_path.parent.mkdir(parents=True, exist_ok=True)
    paths = {
        "json": json_path,
        "md": json_path.with_suffix(".md"),
        "png": json_path.with_suffix(".png"),
    }
    paths["json"].write_text(json.dumps(report.to_dict(), indent=2) + "\n")
    paths["md"].write_text(markdown(report, png_name=paths["png"].name))
    write_png(report, paths["png"])
    return paths


def _fmt(value) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:,.0f}" if value.is_integer() and abs(value) >= 100 else f"{value:,.3f}"
    return f"{value:,}"


def markdown(report: Report, png_name: str | None = None) -> str:
    lat, behind, floor = report.latency_ms, report.behind_schedule, report.floor_ms
    lines = [
        f"# Load run `{report.run_id}` ({report.mode})",
        "",
        f"Started {report.started_at} against `{report.bootstrap}`: "
        f"{_fmt(report.target_rate)} events/s for {_fmt(report.duration_s)} s "
        f"(ramp {_fmt(report.ramp_s)} s), {report.workers} producer worker(s).",
        "",
        "## End-to-end latency (ms, from scheduled send time)",
        "",
        "| p50 | p90 | p99 | p99.9 | max | count |",
        "|---:|---:|---:|---:|---:|---:|",
        f"| {_fmt(lat.get('p50'))} | {_fmt(lat.get('p90'))} | {_fmt(lat.get('p99'))} "
        f"| {_fmt(lat.get('p999'))} | {_fmt(lat.get('max'))} | {_fmt(lat.get('count'))} |",
        "",
    ]
    if floor:
        lines += [
            f"Instrument floor ({floor.get('source')}): p50 {_fmt(floor.get('p50'))} ms, "
            f"p99 {_fmt(floor.get('p99'))} ms, max {_fmt(floor.get('max'))} ms "
            f"at {_fmt(floor.get('rate'))} events/s.",
            "",
        ]
    else:
        lines += ["Instrument floor: not measured.", ""]
    lines += [
        "## Accounting",
        "",
        "| | expected | received | lost | duplicates |",
        "|---|---:|---:|---:|---:|",
        f"| alerts | {_fmt(report.expected_alerts)} | {_fmt(report.received_alerts)} "
        f"| {_fmt(report.lost)} | {_fmt(report.duplicates)} |",
        f"| dead letters | {_fmt(report.dlq_expected)} | {_fmt(report.dlq_received)} "
        f"| {_fmt(report.dlq_lost)} | {_fmt(report.dlq_duplicates)} |",
        "",
        f"Scheduled {_fmt(report.scheduled)}, sent {_fmt(report.sent)} "
        f"({_fmt(report.send_failed)} failed delivery), achieved "
        f"{_fmt(report.achieved_rate)} events/s. Unexpected alerts: "
        f"{_fmt(report.unexpected_alerts)}; foreign records: {_fmt(report.foreign_records)}; "
        f"unparseable answers: {_fmt(report.malformed_answers)}.",
        "",
        "## Schedule",
        "",
    ]
    if behind.get("fell_behind"):
        lines.append(
            f"**Fell behind schedule**: max lag {_fmt(behind.get('max_lag_ms'))} ms, "
            f"{_fmt(behind.get('late_events'))} events sent more than "
            f"{_fmt(behind.get('threshold_ms'))} ms late, {_fmt(behind.get('unsent'))} never sent."
        )
    else:
        lines.append(f"Kept to schedule (max lag {_fmt(behind.get('max_lag_ms'))} ms).")
    lines.append("")
    for note in report.notes:
        lines.append(f"- {note}")
    if png_name:
        lines += ["", f"![latency]({png_name})", ""]
    return "\n".join(lines) + "\n"
