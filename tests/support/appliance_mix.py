"""The known mix of records every pipeline test feeds in, and the check of its outputs."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass

from appliance.rules.rules_file import rules_version

MIX_RULES = """\
rules:
  - id: cpu-high
    severity: warning
    when: "metric = 'cpu' AND value >= 80"
  - id: cpu-crit
    severity: critical
    when: "metric = 'cpu' AND value >= 95"
    message: "CPU critical"
  - id: prod-tag
    severity: info
    when: "tags['env'] = 'prod'"
"""


def _event(event_id, metric="cpu", value=1.0, **extra) -> bytes:
    doc = {"event_id": event_id, "ts": 1732200000123.5, "source": "host-1",
           "metric": metric, "value": value, **extra}
    return json.dumps(doc).encode()


def one_alert_event(event_id: str) -> bytes:
    """An event ``MIX_RULES`` raises exactly one alert for (``cpu-high``): what the tests
    that count alerts per event produce."""
    return _event(event_id, value=85)


@dataclass
class Mix:
    """Records to produce, and exactly what must come out of them."""

    rules_yaml: str
    records: list[bytes]
    alerts: dict[str, tuple[str, list[str]]]  # event_id -> (severity, matched rule ids)
    dead_letters: dict[str, tuple[str, str]]  # raw (as in the DLQ) -> (encoding, error prefix)

    @property
    def rules_version(self) -> str:
        """What every alert of these rules carries (the file holds ``rules_yaml``)."""
        return rules_version(self.rules_yaml.encode("utf-8"))


def make_mix(tag: str) -> Mix:
    """``tag`` makes event ids unique per test so runs never see each other's alerts."""
    e = lambda name: f"{tag}-{name}"  # noqa: E731
    records = [
        _event(e("one"), value=85),
        _event(e("several"), value=97, tags={"env": "prod"}),
        _event(e("none"), value=10),
        _event(e("tag-only"), metric="mem", value=3, tags={"env": "prod", "dc": "x"}),
        _event(e("unknown-field"), value=12, colour="red"),
        _event(e("int-value"), value=95),
    ]
    bad = {
        b'{"event_id": "broken"': ("utf8", "malformed JSON"),
        json.dumps({"event_id": e("no-source"), "ts": 1, "metric": "cpu", "value": 99}).encode():
            ("utf8", "missing field: source"),
        json.dumps({"event_id": e("str-value"), "ts": 1, "source": "h", "metric": "cpu",
                    "value": "99"}).encode(): ("utf8", "wrong type: value must be a number"),
        json.dumps({"event_id": 7, "ts": 1, "source": "h", "metric": "cpu", "value": 99}).encode():
            ("utf8", "wrong type: event_id must be a string"),
        json.dumps({"event_id": e("null-ts"), "ts": None, "source": "h", "metric": "cpu",
                    "value": 99}).encode(): ("utf8", "missing field: ts"),
        json.dumps({"event_id": e("bad-tags"), "ts": 1, "source": "h", "metric": "cpu",
                    "value": 99, "tags": {"env": 1}}).encode():
            ("utf8", "wrong type: tags must be an object"),
        b"\xff\xfe" + tag.encode() + b"\x00\x80": ("base64", "not valid UTF-8"),
        b"": ("utf8", "empty value"),
        b"[1, 2, 3]": ("utf8", "not a JSON object"),
    }
    dead_letters = {}
    for raw, (encoding, error) in bad.items():
        shown = base64.b64encode(raw).decode() if encoding == "base64" else raw.decode()
        dead_letters[shown] = (encoding, error)
    records += list(bad)
    alerts = {
        e("one"): ("warning", ["cpu-high"]),
        e("several"): ("critical", ["cpu-high", "cpu-crit", "prod-tag"]),
        e("tag-only"): ("info", ["prod-tag"]),
        e("int-value"): ("critical", ["cpu-high", "cpu-crit"]),
    }
    return Mix(MIX_RULES, records, alerts, dead_letters)


def check_outputs(mix: Mix, alerts: list[tuple[bytes | None, bytes]],
                  dead_letters: list[tuple[bytes | None, bytes]], exact: bool = True,
                  rules_version: str | None = None) -> None:
    """Every expected alert/dead letter is there, with the right content and nothing else.

    ``exact=False`` allows duplicates (at-least-once after a crash), never strangers.
    ``rules_version`` is the version the alerts carry when the appliance's rules file is
    more than the mix's own rules (default: the mix's).
    """
    expected_version = rules_version or mix.rules_version
    by_id: dict[str, list[dict]] = {}
    for key, value in alerts:
        doc = json.loads(value)
        assert key == doc["alert_id"].encode(), (key, doc)
        assert doc["alert_id"] == doc["event_id"]
        by_id.setdefault(doc["alert_id"], []).append(doc)
    assert set(by_id) == set(mix.alerts), (sorted(by_id), sorted(mix.alerts))
    for event_id, docs in by_id.items():
        severity, rule_ids = mix.alerts[event_id]
        for doc in docs:
            assert doc["severity"] == severity, doc
            assert [r["id"] for r in doc["rules"]] == rule_ids, doc
            assert set(doc) == {"alert_id", "event_id", "source", "metric", "value", "ts",
                                "severity", "rules", "rules_version"}
            assert doc["rules_version"] == expected_version, doc
            assert doc["source"] == "host-1" and doc["ts"] == 1732200000123.5
            assert all(set(r) == {"id", "severity", "message"} for r in doc["rules"])
        if exact:
            assert len(docs) == 1, docs
    by_raw: dict[str, list[dict]] = {}
    for _key, value in dead_letters:
        doc = json.loads(value)
        assert set(doc) == {"error", "raw", "encoding", "topic", "partition", "offset"}, doc
        by_raw.setdefault(doc["raw"], []).append(doc)
    assert set(by_raw) == set(mix.dead_letters), (sorted(by_raw), sorted(mix.dead_letters))
    for raw, docs in by_raw.items():
        encoding, error = mix.dead_letters[raw]
        for doc in docs:
            assert doc["encoding"] == encoding and doc["error"].startswith(error), doc
            assert isinstance(doc["partition"], int) and isinstance(doc["offset"], int)
        if exact:
            assert len(docs) == 1, docs
