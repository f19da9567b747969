"""Event generation: exact shares, deterministic kinds, and records that are what they claim."""

import base64
import json
from collections import Counter

import pytest

from loadgen.events import ALERT_KINDS, BAD_KINDS, NORMAL, EventFactory, matching_rules


def test_shares_are_exact_over_a_window():
    f = EventFactory("run1", alert_ratio=0.3, bad_ratio=0.2)
    kinds = Counter(f.kind(i) for i in range(10_000))
    alerts = sum(kinds[k] for k in ALERT_KINDS)
    bad = sum(kinds[k] for k in BAD_KINDS)
    assert abs(alerts - 3000) <= 5 and abs(bad - 2000) <= 5
    for k in ALERT_KINDS:  # every rule gets its even share
        assert abs(kinds[k] - 1000) <= 5
    for k in BAD_KINDS:
        assert abs(kinds[k] - 500) <= 5


def test_kinds_are_a_pure_function_of_the_index():
    a, b = EventFactory("x1", 0.5, 0.1), EventFactory("x1", 0.5, 0.1)
    assert [a.kind(i) for i in range(500)] == [b.kind(i) for i in range(500)]


def test_good_events_match_exactly_their_rule():
    f = EventFactory("run2", alert_ratio=0.5, bad_ratio=0.0)
    for i in range(300):
        event = json.loads(f.encode(i, 1_700_000_000_123.456))
        assert event["event_id"] == f"run2-{i}"
        assert event["ts"] == pytest.approx(1_700_000_000_123.456)
        assert isinstance(event["source"], str) and isinstance(event["value"], (int, float))
        matched = [r.id for r in matching_rules(event["metric"], event["value"])]
        kind = f.kind(i)
        if kind == NORMAL:
            assert matched == []
        else:
            assert matched == [kind.removeprefix("alert:")]


def test_bad_events_are_each_broken_in_their_own_way():
    f = EventFactory("run3", alert_ratio=0.0, bad_ratio=1.0)
    seen = set()
    for i in range(40):
        raw = f.encode(i, 1.0)
        kind = f.kind(i)
        seen.add(kind)
        if kind == "bad-utf8":
            with pytest.raises(UnicodeDecodeError):
                raw.decode("utf-8")
        elif kind == "bad-json":
            with pytest.raises(json.JSONDecodeError):
                json.loads(raw)
        elif kind == "bad-missing-field":
            assert "metric" not in json.loads(raw)
        elif kind == "bad-type":
            assert isinstance(json.loads(raw)["value"], str)
        # The collector can attribute each one to its index, even via base64.
        assert f.index_in_raw(raw) == i
        assert f.index_in_raw(base64.b64decode(base64.b64encode(raw))) == i
    assert seen == set(BAD_KINDS)


def test_index_of_rejects_other_runs_and_garbage():
    f = EventFactory("abc")
    assert f.index_of("abc-42") == 42
    for other in ("abd-42", "abc-", "abc-4x", None, 42, "xabc-1"):
        assert f.index_of(other) is None


@pytest.mark.parametrize("alert,bad", [(-0.1, 0), (0, 1.1), (0.6, 0.5)])
def test_rejects_impossible_ratios(alert, bad):
    with pytest.raises(ValueError):
        EventFactory("r", alert, bad)


def test_templates_agree_with_the_example_rules_file():
    """loadgen's idea of which event matches which rule is the appliance's example rules."""
    from pathlib import Path

    import yaml

    from loadgen.events import RULE_TEMPLATES

    path = Path(__file__).resolve().parents[2] / "examples" / "rules.yml"
    rules = yaml.safe_load(path.read_text())["rules"]
    assert [(r["id"], r["severity"], r["when"], r.get("message")) for r in rules] == [
        (t.id, t.severity, t.when, t.message) for t in RULE_TEMPLATES]
