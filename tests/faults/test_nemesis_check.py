"""The nemesis's checker on synthetic runs (no Kafka, no Spark): a clean run passes, and
each way of breaking at-least-once is caught, so a green nemesis run means something."""

from __future__ import annotations

import base64
import json
from dataclasses import replace

import pytest

from loadgen.events import BAD_KINDS, EventFactory

from support.faults.nemesis_check import (
    Location,
    OutputRecord,
    ReplayWindow,
    SentEvent,
    Verdict,
    check,
    expected_alert,
)

EVENTS, ALERTS, DLQ = "ev", "al", "dlq"
VERSION = "0123456789abcdef"
T0 = 1_800_000_000.0  # epoch s of event 0; one event every 0.1 s


def sent_events(n: int = 60) -> list[SentEvent]:
    """``n`` events of the nemesis's mix, each written once at ``ev/(i % 2)@(i // 2)``."""
    factory = EventFactory("chk", alert_ratio=0.2, bad_ratio=0.1)
    out = []
    for i in range(n):
        kind = factory.kind(i)
        sent_at = T0 + i * 0.1
        at = (Location(EVENTS, i % 2, i // 2),)
        out.append(SentEvent(i, factory.event_id(i).encode(), factory.encode(i, sent_at * 1e3),
                             kind.startswith("alert:"), kind in BAD_KINDS, sent_at, at, at))
    return out


def alert_for(event: SentEvent, offset: int) -> OutputRecord:
    """The alert the appliance writes for ``event`` (pipeline._alert_json's fields)."""
    want = expected_alert(event)
    assert want is not None
    doc = {"alert_id": want.event_id, "event_id": want.event_id, "source": want.source,
           "metric": want.metric, "value": want.value, "ts": want.ts,
           "severity": want.severity,
           "rules": [{"id": r.id, "severity": r.severity, "message": r.message}
                     for r in want.rules],
           "rules_version": VERSION}
    return OutputRecord(Location(ALERTS, 0, offset), event.key, json.dumps(doc).encode())


def dead_letter_for(event: SentEvent, offset: int, raw: bytes | None = None,
                    source: Location | None = None) -> OutputRecord:
    """The dead letter the appliance writes for ``event`` (pipeline._dead_letter_json)."""
    raw = event.raw if raw is None else raw
    source = source or event.written[0]
    try:
        text, encoding = raw.decode("utf-8"), "utf8"
    except UnicodeDecodeError:  # as the appliance writes it: plain base64, no line breaks
        text, encoding = base64.b64encode(raw).decode(), "base64"
    doc = {"error": "malformed JSON", "raw": text, "encoding": encoding,
           "topic": source.topic, "partition": source.partition, "offset": source.offset}
    return OutputRecord(Location(DLQ, 0, offset), event.key, json.dumps(doc).encode())


def outputs(events: list[SentEvent]) -> tuple[list[OutputRecord], list[OutputRecord]]:
    """One alert per alerting event, one dead letter per bad one: a perfect run."""
    alerts = [alert_for(e, n) for n, e in enumerate(x for x in events if x.should_alert)]
    dead = [dead_letter_for(e, n) for n, e in enumerate(x for x in events if x.bad)]
    return alerts, dead


def first(events: list[SentEvent], what: str) -> SentEvent:
    pick = {"alert": lambda e: e.should_alert, "bad": lambda e: e.bad,
            "normal": lambda e: not e.should_alert and not e.bad}[what]
    return next(e for e in events if pick(e))


def kinds(verdict: Verdict) -> list[str]:
    return sorted(f.kind for f in verdict.lost + verdict.unexpected)


def test_a_clean_run_passes_and_counts_the_mix():
    events = sent_events()
    alerts, dead = outputs(events)
    assert any(b'"base64"' in r.value for r in dead)  # bad UTF-8 is among the dead letters
    verdict = check(events, alerts, dead, rules_version=VERSION)
    assert verdict.ok, verdict.explain()
    assert (verdict.sent, verdict.alerting, verdict.bad) == (60, 12, 6)
    assert verdict.duplicates == []
    assert verdict.line() == ("sent 60 alerting 12 bad 6 lost 0 unexpected 0 dup 0 "
                              "dup outside window 0")


def test_an_alerting_event_without_alert_is_lost():
    events = sent_events()
    alerts, dead = outputs(events)
    verdict = check(events, alerts[1:], dead)
    assert not verdict.ok
    assert [(f.kind, f.index) for f in verdict.lost] == [
        ("lost alert", first(events, "alert").index)]


def test_a_bad_event_without_dead_letter_is_lost():
    events = sent_events()
    alerts, dead = outputs(events)
    verdict = check(events, alerts, dead[1:])
    assert [(f.kind, f.index) for f in verdict.lost] == [
        ("lost dead letter", first(events, "bad").index)]


def test_a_dead_letter_with_other_bytes_is_wrong_and_leaves_the_event_lost():
    events = sent_events()
    alerts, dead = outputs(events)
    bad = first(events, "bad")
    dead[0] = dead_letter_for(bad, 0, raw=bad.raw[:-1] + b"X")
    verdict = check(events, alerts, dead)
    assert kinds(verdict) == ["lost dead letter", "wrong dead letter"]


def test_a_dead_letter_pointing_at_another_record_is_caught():
    """Right bytes, wrong offset: it does not trace back to where the event was written."""
    events = sent_events()
    alerts, dead = outputs(events)
    bad = first(events, "bad")
    normal = first(events, "normal")
    dead[0] = dead_letter_for(bad, 0, source=normal.written[0])
    verdict = check(events, alerts, dead)
    assert kinds(verdict) == ["dead letter for a good event", "lost dead letter"]


def test_an_alert_for_a_normal_event_and_a_wrong_alert_are_unexpected():
    events = sent_events()
    alerts, dead = outputs(events)
    normal, alerting = first(events, "normal"), first(events, "alert")
    stranger = alert_for(replace(normal, raw=alerting.raw.replace(
        alerting.key or b"", normal.key or b"")), 99)
    wrong = json.loads(alerts[1].value)
    wrong["severity"] = "info" if wrong["severity"] != "info" else "critical"
    alerts += [stranger, replace(alerts[1], value=json.dumps(wrong).encode())]
    verdict = check(events, alerts, dead, rules_version=VERSION)
    assert kinds(verdict) == ["alert for an event that should not alert", "wrong alert"]
    assert verdict.lost == []


@pytest.mark.parametrize("output", ["alert", "dead letter"])
def test_untraceable_records_are_unexpected(output):
    events = sent_events()
    alerts, dead = outputs(events)
    if output == "alert":
        alerts.append(replace(alerts[0], value=alerts[0].value.replace(b"chk-", b"xyz-")))
    else:
        dead.append(dead_letter_for(first(events, "bad"), 50,
                                    source=Location(EVENTS, 1, 10_000)))
    verdict = check(events, alerts, dead)
    assert kinds(verdict) == [f"untraceable {output}"]


def test_a_duplicate_outside_every_replay_window_fails():
    events = sent_events()
    alerts, dead = outputs(events)
    late = [e for e in events if e.should_alert][-1]  # sent 5.x s after T0
    window = ReplayWindow.around("appliance-kill", started=T0 + 20.0,
                                 recovered=T0 + 40.0, interval_s=1.0)  # opens at T0 + 9
    verdict = check(events, alerts + [alert_for(late, 100)], dead, [window])
    assert not verdict.ok
    assert [(d.index, d.output, d.extra, d.window) for d in verdict.duplicates_outside] == [
        (late.index, "alert", 1, None)]


def test_a_duplicate_inside_a_replay_window_is_allowed():
    events = sent_events()
    alerts, dead = outputs(events)
    bad = first(events, "bad")
    alerting = first(events, "alert")
    window = ReplayWindow.around("broker-kill", started=T0 + 5.0, recovered=T0 + 30.0,
                                 interval_s=5.0)  # opens at T0 - 10
    verdict = check(events, alerts + [alert_for(alerting, 100)],
                    dead + [dead_letter_for(bad, 100)], [window])
    assert verdict.ok, verdict.explain()
    assert sorted((d.output, d.window) for d in verdict.duplicates) == [
        ("alert", "broker-kill"), ("dead letter", "broker-kill")]
    assert verdict.line().endswith("dup 2 dup outside window 0")


def test_an_event_written_twice_may_alert_twice_but_needs_both_dead_letters():
    """A producer re-send writes the same bytes at two offsets: both are records the
    appliance must process, neither copy's output is a duplicate."""
    events = sent_events()
    alerting, bad = first(events, "alert"), first(events, "bad")
    twice = {e.index: replace(e, written=(*e.written, Location(EVENTS, 0, 500 + e.index)))
             for e in (alerting, bad)}
    events = [twice.get(e.index, e) for e in events]
    alerts, dead = outputs(events)
    extra_alert = alert_for(twice[alerting.index], 100)
    verdict = check(events, alerts + [extra_alert], dead)
    assert verdict.duplicates == []
    assert [(f.kind, f.index) for f in verdict.lost] == [("lost dead letter", bad.index)]
    second = dead_letter_for(twice[bad.index], 100, source=twice[bad.index].written[1])
    assert check(events, alerts + [extra_alert], dead + [second]).ok


def test_an_acknowledged_record_missing_from_the_events_topic_is_lost_input():
    events = sent_events()
    alerts, dead = outputs(events)
    normal = first(events, "normal")
    events[normal.index] = replace(normal, written=())
    verdict = check(events, alerts, dead)
    assert kinds(verdict) == ["lost input"]
