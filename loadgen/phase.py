"""What one measured phase produced, and how it becomes a ``Report``."""

from __future__ import annotations

import sys
from dataclasses import dataclass

from appliance.logs import get_logger
from loadgen.collector import FLOOR, Collector
from loadgen.config import LoadConfig
from loadgen.report import Report
from loadgen.schedule import Schedule

log = get_logger("loadgen.phase")
# Isolated scheduler hiccups on a shared machine are reported (max_lag_ms, late_events),
# but only a sustained shortfall counts as falling behind.
LATE_SHARE_TOLERATED = 0.001


@dataclass
class Phase:
    collector: Collector
    results: list  # WorkerResult per producer worker
    schedule: Schedule
    t0: float  # epoch seconds when event 0 was due
    sending_ended: float
    expected_alerts: int
    expected_dlq: int
    lost: int
    dlq_lost: int


def build_report(config: LoadConfig, phase: Phase, mode: str, floor, started_at: str) -> Report:
    """Turn a measured phase into the report (and say on stderr if it fell behind)."""
    c, results, schedule = phase.collector, phase.results, phase.schedule
    sent = sum(r.sent for r in results)
    failed = sum(len(r.failed) for r in results)
    span = max(schedule.duration, max(r.finished_at for r in results) - phase.t0)
    unsent = sum(r.unsent for r in results)
    late = sum(r.late_events for r in results)
    first_late = [r.first_late_offset_s for r in results if r.first_late_offset_s is not None]
    behind = {
        "fell_behind": unsent > 0 or late > LATE_SHARE_TOLERATED * max(sent, 1),
        "threshold_ms": config.behind_ms,
        "max_lag_ms": max(r.max_lag_ms for r in results),
        "late_events": late,
        "unsent": unsent,
        "first_late_offset_s": min(first_late) if first_late else None,
    }
    notes = [r.error for r in results if r.error]
    run_p99 = c.latency.percentile_ms(99.0) if c.latency.count else None
    if mode != FLOOR and floor and floor.get("p99") is not None and run_p99:
        notes.append(f"the instrument's own floor p99 ({floor['p99']:,.3f} ms) is "
                     f"{100.0 * floor['p99'] / run_p99:.0f}% of this run's p99 "
                     f"({run_p99:,.3f} ms)")
    behind_note = (
        f"generator fell behind its schedule: max lag {behind['max_lag_ms']:,.1f} ms, "
        f"{late:,} events late by more than {config.behind_ms:g} ms, {unsent:,} never "
        f"sent; target {schedule.rate:,.0f}/s, achieved {sent / span:,.0f}/s "
        f"with {config.workers} worker(s): add --workers or lower --rate")
    if behind["fell_behind"]:
        notes.append(behind_note)
    topics = ({"events": config.floor_topic} if mode == FLOOR else
              {"events": config.events_topic, "alerts": config.alerts_topic,
               "dead_letters": config.dlq_topic})
    report = Report(
        run_id=c.factory.run_id, mode=mode, bootstrap=config.bootstrap, topics=topics,
        target_rate=schedule.rate, ramp_s=schedule.ramp, duration_s=schedule.duration,
        workers=config.workers, scheduled=schedule.total, sent=sent, send_failed=failed,
        achieved_rate=round(sent / span, 1), alert_ratio=c.factory.alert_ratio,
        bad_ratio=c.factory.bad_ratio, expected_alerts=phase.expected_alerts,
        received_alerts=c.received, lost=phase.lost, duplicates=c.duplicates,
        unexpected_alerts=c.unexpected_alerts, dlq_expected=phase.expected_dlq,
        dlq_received=c.dlq_received, dlq_lost=phase.dlq_lost, dlq_duplicates=c.dlq_duplicates,
        foreign_records=c.foreign, malformed_answers=c.malformed_answers, floor_ms=floor,
        latency_ms=c.latency.summary(),
        behind_schedule=behind, grace_s=config.grace, started_at=started_at,
        schedule_start_epoch=round(phase.t0, 6),
        latency_series=c.latency.series(), latency_curve=c.latency.curve(),
        latency_hdr=c.latency.encoded() if c.latency.count else "", notes=notes,
        resent=sum(r.resent for r in results),
        delivery_max_ms=(None if c.delivery_max_ms is None
                         else round(c.delivery_max_ms, 3)),
    )
    if behind["fell_behind"]:
        print(f"loadgen: WARNING {behind_note}", file=sys.stderr, flush=True)
    log.info("run.finished", run_id=report.run_id, mode=mode, sent=sent,
             expected_alerts=report.expected_alerts, received_alerts=report.received_alerts,
             lost=report.lost, p99_ms=report.latency_ms.get("p99"),
             fell_behind=behind["fell_behind"])
    return report
