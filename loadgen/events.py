"""Event generation: which event index is which kind, and its bytes on the wire.

The kind of event ``i`` is a pure function of ``i`` and the ratios, so the producer
processes and the alert collector agree on what was sent without talking to each other:
the collector recomputes the kind of every index it hears about. An equidistributed
(golden-ratio) sequence is used instead of a random one so the shares are exact over any
window, which keeps the expected counts of short test runs predictable.

``RULE_TEMPLATES`` is loadgen's one source of truth for which events match which example
rule (kept in step with ``examples/rules.yml``): a matching event has ``metric`` equal to
the rule's metric and ``value`` at or above its threshold; a normal event stays below every
threshold.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

GOLDEN = 0.6180339887498949

NORMAL = "normal"
BAD_KINDS = ("bad-json", "bad-missing-field", "bad-type", "bad-utf8")


@dataclass(frozen=True)
class RuleTemplate:
    """An example rule of the form ``metric = '<metric>' AND value >= <threshold>``."""

    id: str
    severity: str
    metric: str
    threshold: float
    message: str

    @property
    def when(self) -> str:
        return f"metric = '{self.metric}' AND value >= {self.threshold:g}"

    def matches(self, metric: str, value: float) -> bool:
        return metric == self.metric and value >= self.threshold


RULE_TEMPLATES: tuple[RuleTemplate, ...] = (
    RuleTemplate("cpu-critical", "critical", "cpu.util", 95, "CPU at or above 95%"),
    RuleTemplate("mem-warning", "warning", "mem.used_pct", 90, "memory above 90%"),
    RuleTemplate("disk-info", "info", "disk.used_pct", 80, "disk above 80%"),
)
ALERT_KINDS = tuple(f"alert:{r.id}" for r in RULE_TEMPLATES)
RULES_BY_ID = {r.id: r for r in RULE_TEMPLATES}


def matching_rules(metric: object, value: object) -> list[RuleTemplate]:
    """The example rules an event matches (empty for non-numbers)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return []
    return [r for r in RULE_TEMPLATES if r.matches(metric, value)]  # type: ignore[arg-type]


def rules_yaml() -> str:
    """The example rules as the appliance's rules YAML (for tests and demos)."""
    lines = ["rules:"]
    for r in RULE_TEMPLATES:
        lines += [
            f"  - id: {r.id}",
            f"    severity: {r.severity}",
            f'    when: "{r.when}"',
            f'    message: "{r.message}"',
        ]
    return "\n".join(lines) + "\n"


class EventFactory:
    """Builds event ``i`` of run ``run_id``; the same arguments always give the same event."""

    def __init__(self, run_id: str, alert_ratio: float = 0.1, bad_ratio: float = 0.0):
        if not 0.0 <= bad_ratio <= 1.0 or not 0.0 <= alert_ratio <= 1.0:
            raise ValueError("alert_ratio and bad_ratio must be within [0, 1]")
        if alert_ratio + bad_ratio > 1.0:
            raise ValueError("alert_ratio + bad_ratio must not exceed 1")
        if not re.fullmatch(r"[a-z0-9]+", run_id):
            raise ValueError("run_id must be lowercase letters and digits")
        self.run_id = run_id
        self.alert_ratio = alert_ratio
        self.bad_ratio = bad_ratio
        self.id_pattern = re.compile(re.escape(run_id) + r"-(\d+)")

    def event_id(self, i: int) -> str:
        return f"{self.run_id}-{i}"

    def index_of(self, event_id: object) -> int | None:
        """The index of one of this run's event ids, else ``None`` (foreign or garbage)."""
        if not isinstance(event_id, str):
            return None
        prefix, _, number = event_id.rpartition("-")
        if prefix != self.run_id or not number.isdigit():
            return None
        return int(number)

    def index_in_raw(self, raw: bytes) -> int | None:
        """Find this run's event id inside the raw bytes of a dead letter."""
        found = self.id_pattern.search(raw.decode("latin-1"))
        return int(found.group(1)) if found else None

    def kind(self, i: int) -> str:
        u = (i * GOLDEN) % 1.0
        if u < self.bad_ratio:
            return BAD_KINDS[min(int(u / self.bad_ratio * len(BAD_KINDS)), len(BAD_KINDS) - 1)]
        u -= self.bad_ratio
        if u < self.alert_ratio:
            n = len(ALERT_KINDS)
            return ALERT_KINDS[min(int(u / self.alert_ratio * n), n - 1)]
        return NORMAL

    def encode(self, i: int, ts_ms: float) -> bytes:
        """The record value of event ``i`` scheduled at ``ts_ms`` (epoch ms)."""
        kind = self.kind(i)
        eid = self.event_id(i)
        source = f"host-{i % 50}"
        if kind == NORMAL:
            rule = RULE_TEMPLATES[i % len(RULE_TEMPLATES)]
            value = round(rule.threshold * 0.5 + (i % 7), 3)
            return _event_json(eid, ts_ms, source, rule.metric, value)
        if kind.startswith("alert:"):
            rule = RULES_BY_ID[kind[6:]]
            return _event_json(eid, ts_ms, source, rule.metric, rule.threshold + (i % 5))
        if kind == "bad-json":
            return f'{{"event_id":"{eid}","ts":{ts_ms:.3f},"source":"{source}","metric'.encode()
        if kind == "bad-missing-field":
            return json.dumps({"event_id": eid, "ts": ts_ms, "source": source}).encode()
        if kind == "bad-type":
            return json.dumps(
                {"event_id": eid, "ts": ts_ms, "source": source, "metric": "cpu.util",
                 "value": "ninety-nine"}
            ).encode()
        # bad-utf8: a valid-looking JSON body behind bytes that are not UTF-8.
        return b"\xff\xfe" + _event_json(eid, ts_ms, source, "cpu.util", 99)


def _event_json(eid: str, ts_ms: float, source: str, metric: str, value: float) -> bytes:
    return (
        f'{{"event_id":"{eid}","ts":{ts_ms:.3f},"source":"{source}",'
        f'"metric":"{metric}","value":{value},"tags":{{"generator":"loadgen"}}}}'
    ).encode()
