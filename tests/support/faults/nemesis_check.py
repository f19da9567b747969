"""The nemesis's checker: every event sent against every record read back.

At-least-once (docs/appliance.md) promises each alerting event at least one alert with its
``alert_id`` and each bad record at least one dead letter; duplicates are the price of a
replay after a crash, and nothing else may appear. This module turns that promise into
an account, from plain data (no Kafka, no Spark), so it is tested by itself on synthetic
records (``test_nemesis_check.py``) before it judges a real run (``test_nemesis.py``):

- **lost**: an alerting event with no alert; a bad event one of whose records in the
  events topic has no dead letter that carries exactly the bytes sent (``raw``, decoded
  per ``encoding``) and points back at that record (``topic``/``partition``/``offset``);
  a record the broker acknowledged that is not in the events topic.
- **unexpected**: an alert or dead letter that traces back to no sent event, or to one
  that should not have produced it, or whose content is not what that event makes.
- **duplicates**: more copies than the event has records in the events topic (a producer
  re-send writes one event twice, and each copy is processed: that is not a duplicate).
  A duplicate is allowed only for an event sent inside a replay window (``ReplayWindow``):
  from the trigger interval + 10 s before a fault that can make the appliance replay, to
  the end of that fault's recovery. Anywhere else it is a failure.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from loadgen.events import RuleTemplate, matching_rules

#: How far before a replay-capable fault a replayed event may have been sent, on top of the
#: trigger interval: the last committed epoch/batch can lag the fault by about one interval,
#: plus the time the query was behind.
REPLAY_SLACK_S = 10.0
SEVERITY_ORDER = ("info", "warning", "critical")
ALERT_FIELDS = frozenset({"alert_id", "event_id", "source", "metric", "value", "ts",
                          "severity", "rules", "rules_version"})
DEAD_LETTER_FIELDS = frozenset({"error", "raw", "encoding", "topic", "partition", "offset"})
EXAMPLES_KEPT = 20


@dataclass(frozen=True, order=True)
class Location:
    """Where one record is in Kafka."""

    topic: str
    partition: int
    offset: int

    def __str__(self) -> str:
        return f"{self.topic}/{self.partition}@{self.offset}"


@dataclass(frozen=True)
class SentEvent:
    """One event the load sent: its bytes exactly, what it should make, and where it is.

    ``written``: every record in the events topic with exactly these bytes (read back after
    the run; two when a producer re-send wrote it twice). ``acknowledged``: where the broker
    said it wrote it.
    """

    index: int
    key: bytes | None
    raw: bytes
    should_alert: bool
    bad: bool
    sent_at: float  # epoch s of the first send
    written: tuple[Location, ...] = ()
    acknowledged: tuple[Location, ...] = ()

    @property
    def event_id(self) -> str | None:
        return None if self.key is None else self.key.decode("utf-8", "replace")


@dataclass(frozen=True)
class OutputRecord:
    """A record read back from the alerts or the dead-letter topic."""

    location: Location
    key: bytes | None
    value: bytes


@dataclass(frozen=True)
class ReplayWindow:
    """Events sent from ``opens`` to ``closes`` (epoch s) may be duplicated: a replay after
    the fault ``fault`` can repeat them."""

    fault: str
    opens: float
    closes: float

    @classmethod
    def around(cls, fault: str, started: float, recovered: float,
               interval_s: float) -> ReplayWindow:
        """The window of a replay-capable fault injected at ``started`` whose recovery
        ended at ``recovered``."""
        return cls(fault, started - interval_s - REPLAY_SLACK_S, recovered)

    def holds(self, sent_at: float) -> bool:
        return self.opens <= sent_at <= self.closes


@dataclass(frozen=True)
class Finding:
    """One problem: ``kind`` names it, ``index`` is the event's (None if untraceable)."""

    kind: str
    index: int | None
    detail: str

    def __str__(self) -> str:
        return f"{self.kind} #{'-' if self.index is None else self.index}: {self.detail}"


@dataclass(frozen=True)
class Duplicate:
    """``extra`` copies beyond the expected of event ``index``'s ``output``."""

    index: int
    output: str  # "alert" | "dead letter"
    extra: int
    sent_at: float
    window: str | None  # the fault whose replay window covers it, None if outside all

    def __str__(self) -> str:
        where = f"in the window of {self.window}" if self.window else "outside every window"
        return f"{self.output} of #{self.index} x{self.extra} extra, {where}"


@dataclass
class Verdict:
    sent: int
    alerting: int
    bad: int
    lost: list[Finding] = field(default_factory=list)
    unexpected: list[Finding] = field(default_factory=list)
    duplicates: list[Duplicate] = field(default_factory=list)

    @property
    def duplicates_outside(self) -> list[Duplicate]:
        return [d for d in self.duplicates if d.window is None]

    @property
    def duplicate_copies(self) -> int:
        return sum(d.extra for d in self.duplicates)

    @property
    def ok(self) -> bool:
        return not self.lost and not self.unexpected and not self.duplicates_outside

    def line(self) -> str:
        return (f"sent {self.sent} alerting {self.alerting} bad {self.bad} "
                f"lost {len(self.lost)} unexpected {len(self.unexpected)} "
                f"dup {self.duplicate_copies} "
                f"dup outside window {sum(d.extra for d in self.duplicates_outside)}")

    def explain(self) -> str:
        """The line and the first few of each kind of problem, for an assertion message."""
        parts = [self.line()]
        for title, items in (("lost", self.lost), ("unexpected", self.unexpected),
                             ("duplicates outside window", self.duplicates_outside)):
            if items:
                parts.append(f"{title} ({len(items)}):")
                parts += [f"  {item}" for item in items[:EXAMPLES_KEPT]]
        return "\n".join(parts)


# -- expected alert content ----------------------------------------------------------


@dataclass(frozen=True)
class ExpectedAlert:
    """What the alert of one event must say (fields the appliance copies or derives)."""

    event_id: str
    source: str
    metric: str
    value: float
    ts: float
    severity: str
    rules: tuple[RuleTemplate, ...]


def expected_alert(event: SentEvent) -> ExpectedAlert | None:
    """The alert a sent event makes by the example rules, None when it makes none."""
    try:
        doc = json.loads(event.raw)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(doc, dict):
        return None
    rules = tuple(matching_rules(doc.get("metric"), doc.get("value")))
    if not rules:
        return None
    severity = max((r.severity for r in rules), key=SEVERITY_ORDER.index)
    return ExpectedAlert(doc["event_id"], doc["source"], doc["metric"], float(doc["value"]),
                         float(doc["ts"]), severity, rules)


def alert_problem(doc: object, key: bytes | None, want: ExpectedAlert,
                  rules_version: str | None) -> str | None:
    """What is wrong with an alert's key and JSON, None if nothing."""
    if not isinstance(doc, dict) or not ALERT_FIELDS <= set(doc):
        return f"not an alert document: {doc!r:.200}"
    if key != want.event_id.encode():
        return f"key {key!r} is not the event id {want.event_id!r}"
    for name in ("alert_id", "event_id", "source", "metric", "severity"):
        expected = want.event_id if name == "alert_id" else getattr(want, name)
        if doc[name] != expected:
            return f"{name} {doc[name]!r}, expected {expected!r}"
    for name in ("value", "ts"):
        got = doc[name]
        if not isinstance(got, (int, float)) or not math.isclose(got, getattr(want, name),
                                                                 rel_tol=1e-12):
            return f"{name} {got!r}, expected {getattr(want, name)!r}"
    if not isinstance(doc["rules"], list) or not all(isinstance(r, dict) for r in doc["rules"]):
        return f"rules {doc['rules']!r:.200} is not a list of rules"
    listed = [(r.get("id"), r.get("severity"), r.get("message")) for r in doc["rules"]]
    expected_rules = [(r.id, r.severity, r.message) for r in want.rules]
    if listed != expected_rules:
        return f"rules {listed}, expected {expected_rules}"
    if rules_version is not None and doc["rules_version"] != rules_version:
        return f"rules_version {doc['rules_version']!r}, expected {rules_version!r}"
    return None


def dead_letter_raw(doc: dict) -> bytes | None:
    """The original bytes a dead letter carries, None if its encoding is not understood."""
    raw, encoding = doc.get("raw"), doc.get("encoding")
    if not isinstance(raw, str):
        return None
    if encoding == "utf8":
        return raw.encode("utf-8")
    if encoding == "base64":
        try:  # plain RFC 4648 base64, no line breaks (appliance.tuning)
            return base64.b64decode(raw, validate=True)
        except (binascii.Error, ValueError):
            return None
    return None


# -- the check ---------------------------------------------------------------------------


@dataclass
class _Tally:
    """What the outputs amounted to, per event (by index) and per events-topic record."""

    alerts: Counter = field(default_factory=Counter)  # index -> good alerts
    dead_letters: Counter = field(default_factory=Counter)  # Location -> good dead letters
    unexpected: list[Finding] = field(default_factory=list)


def check(events: Sequence[SentEvent], alerts: Iterable[OutputRecord],
          dead_letters: Iterable[OutputRecord], windows: Sequence[ReplayWindow] = (),
          rules_version: str | None = None) -> Verdict:
    """The account of one run. ``rules_version``: the version every alert must carry
    (None: not checked)."""
    by_id = {e.event_id: e for e in events if e.event_id is not None}
    by_location = {loc: e for e in events for loc in e.written}
    tally = _Tally()
    for record in alerts:
        _tally_alert(record, by_id, tally, rules_version)
    for record in dead_letters:
        _tally_dead_letter(record, by_location, tally)
    verdict = Verdict(len(events), sum(e.should_alert for e in events),
                      sum(e.bad for e in events), unexpected=tally.unexpected)
    for event in events:
        verdict.lost += _lost(event, tally)
        verdict.duplicates += _duplicates(event, tally, windows)
    return verdict


def _tally_alert(record: OutputRecord, by_id: dict[str, SentEvent], tally: _Tally,
                 rules_version: str | None) -> None:
    try:
        doc = json.loads(record.value)
    except (UnicodeDecodeError, json.JSONDecodeError):
        doc = None
    alert_id = doc.get("alert_id") if isinstance(doc, dict) else None
    event = by_id.get(alert_id) if isinstance(alert_id, str) else None
    if event is None:
        tally.unexpected.append(Finding("untraceable alert", None,
                                        f"{record.location}: {record.value[:200]!r}"))
        return
    want = expected_alert(event)
    if not event.should_alert or want is None:
        tally.unexpected.append(Finding("alert for an event that should not alert",
                                        event.index, f"{record.location}"))
        return
    problem = alert_problem(doc, record.key, want, rules_version)
    if problem is not None:
        tally.unexpected.append(Finding("wrong alert", event.index,
                                        f"{record.location}: {problem}"))
        return
    tally.alerts[event.index] += 1


def _tally_dead_letter(record: OutputRecord, by_location: dict[Location, SentEvent],
                       tally: _Tally) -> None:
    try:
        doc = json.loads(record.value)
    except (UnicodeDecodeError, json.JSONDecodeError):
        doc = None
    if not isinstance(doc, dict) or not DEAD_LETTER_FIELDS <= set(doc):
        tally.unexpected.append(Finding("untraceable dead letter", None,
                                        f"{record.location}: {record.value[:200]!r}"))
        return
    source = Location(doc["topic"], doc["partition"], doc["offset"]) \
        if isinstance(doc["partition"], int) and isinstance(doc["offset"], int) else None
    event = by_location.get(source) if source is not None else None
    if source is None or event is None:
        tally.unexpected.append(Finding(
            "untraceable dead letter", None,
            f"{record.location} points at {source or 'nothing'}, where no event was written"))
        return
    problem = _dead_letter_problem(doc, record.key, event)
    if problem is not None:
        tally.unexpected.append(Finding(problem[0], event.index,
                                        f"{record.location} for {source}: {problem[1]}"))
        return
    tally.dead_letters[source] += 1


def _dead_letter_problem(doc: dict, key: bytes | None,
                         event: SentEvent) -> tuple[str, str] | None:
    """``(kind, detail)`` of what is wrong with a traceable dead letter, None if nothing."""
    if not event.bad:
        return "dead letter for a good event", f"error {doc['error']!r}"
    raw = dead_letter_raw(doc)
    if raw is None:
        return "wrong dead letter", f"raw is not {doc['encoding']!r}: {doc['raw']!r:.120}"
    if raw != event.raw:
        return ("wrong dead letter",
                f"raw ({doc['encoding']}) is {raw!r:.120} but {event.raw!r:.120} was sent")
    if not isinstance(doc["error"], str) or not doc["error"]:
        return "wrong dead letter", f"no error reason: {doc['error']!r}"
    if key != event.key:
        return "wrong dead letter", f"key {key!r}, the event's is {event.key!r}"
    return None


def _lost(event: SentEvent, tally: _Tally) -> list[Finding]:
    found = [Finding("lost input", event.index, f"acknowledged at {loc} but not there")
             for loc in event.acknowledged if loc not in event.written]
    if event.should_alert and tally.alerts[event.index] == 0:
        where = ", ".join(map(str, event.written)) or "nowhere in the events topic"
        found.append(Finding("lost alert", event.index, f"written at {where}"))
    if event.bad:
        if not event.written:
            found.append(Finding("lost dead letter", event.index,
                                 "nowhere in the events topic"))
        found += [Finding("lost dead letter", event.index, f"none for {loc}")
                  for loc in event.written if tally.dead_letters[loc] == 0]
    return found


def _duplicates(event: SentEvent, tally: _Tally,
                windows: Sequence[ReplayWindow]) -> list[Duplicate]:
    extras: dict[str, int] = defaultdict(int)
    if event.should_alert:
        extras["alert"] = tally.alerts[event.index] - max(1, len(event.written))
    if event.bad:
        extras["dead letter"] = sum(max(0, tally.dead_letters[loc] - 1)
                                    for loc in event.written)
    window = next((w.fault for w in windows if w.holds(event.sent_at)), None)
    return [Duplicate(event.index, output, extra, event.sent_at, window)
            for output, extra in extras.items() if extra > 0]
