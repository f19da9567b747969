"""What the appliance must make of one record, computed in plain Python from the contract
(DESIGN.md, "Data formats"), independently of the Spark pipeline it checks.

Decisions where JSON parsers differ, taken from the contract's "not valid JSON goes to
the dead-letter topic" and stated here once:

- strict RFC 8259: no ``NaN``/``Infinity`` literals, nothing but whitespace after the
  value, no byte-order mark, no lone surrogate escapes (``"\\ud800"``);
- duplicate keys in any object make the record malformed (parsers disagree on which
  value wins, so no alert may depend on it);
- nesting deeper than Spark's JSON parser allows (about 1,000 levels) is malformed; the
  generator never builds depths between ``SAFE_DEPTH`` and ``TOO_DEEP``;
- a number that overflows a double (``1e400``) is "not a finite number": no alert could
  carry it as JSON.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

SAFE_DEPTH = 600  # well inside both parsers' limits (Python's recursion limit too)
TOO_DEEP = 1100
REQUIRED = {"event_id": "string", "ts": "number", "source": "string", "metric": "string",
            "value": "number"}
RULES_YAML = """\
rules:
  - id: hot
    severity: critical
    when: "value >= 90"
  - id: cpu-negative
    severity: warning
    when: "metric = 'cpu' AND value < 0"
  - id: prod
    severity: info
    when: "tags['env'] = 'prod'"
"""
SEVERITY_ORDER = {"info": 0, "warning": 1, "critical": 2}


@dataclass(frozen=True)
class Expected:
    kind: str  # "alert" | "dead_letter" | "none"
    event_id: str | None = None
    severity: str | None = None
    rules: tuple[str, ...] = ()
    error: str | None = None  # dead letter: the reason's start (before ", got ...")
    event: dict | None = None


class _Malformed(ValueError):
    pass


def _no_duplicates(pairs):
    keys = [k for k, _v in pairs]
    if len(keys) != len(set(keys)):
        raise _Malformed("duplicate key")
    return dict(pairs)


def _reject_constant(name):
    raise _Malformed(f"literal {name}")


def _depth(text: str) -> int:
    depth = best = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            best = max(best, depth)
        elif ch in "]}":
            depth -= 1
    return best


def _has_lone_surrogate(value) -> bool:
    if isinstance(value, str):
        return any(0xD800 <= ord(c) <= 0xDFFF for c in value)
    if isinstance(value, dict):
        return any(_has_lone_surrogate(k) or _has_lone_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_lone_surrogate(v) for v in value)
    return False


def parse_strict(text: str):
    if text.startswith("\ufeff"):
        raise _Malformed("byte-order mark")
    depth = _depth(text)
    if depth > SAFE_DEPTH:
        raise _Malformed("too deep")
    try:
        doc = json.loads(text, object_pairs_hook=_no_duplicates,
                         parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:
        raise _Malformed(str(exc)) from None
    if _has_lone_surrogate(doc):
        raise _Malformed("lone surrogate")
    return doc


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def as_double(v) -> float:
    """The double a JSON number becomes (an integer too big for one overflows)."""
    try:
        return float(v)
    except OverflowError:
        return math.copysign(math.inf, v)


def _field_errors(doc: dict) -> list[str]:
    errors = []
    for name, kind in REQUIRED.items():
        v = doc.get(name)
        if v is None:
            errors.append(f"missing field: {name}")
        elif kind == "string" and not isinstance(v, str):
            errors.append(f"wrong type: {name} must be a string")
        elif kind == "number" and not _is_number(v):
            errors.append(f"wrong type: {name} must be a number")
        elif kind == "number" and math.isinf(as_double(v)):
            errors.append(f"wrong type: {name} must be a finite number")
    tags = doc.get("tags")
    if tags is not None and (not isinstance(tags, dict)
                             or not all(isinstance(x, str) for x in tags.values())):
        errors.append("wrong type: tags must be an object of string to string")
    return errors


def _matches(doc: dict) -> list[tuple[str, str]]:
    value = as_double(doc["value"])
    tags = doc.get("tags") or {}
    out = []
    if value >= 90:
        out.append(("hot", "critical"))
    if doc["metric"] == "cpu" and value < 0:
        out.append(("cpu-negative", "warning"))
    if tags.get("env") == "prod":
        out.append(("prod", "info"))
    return out


def expect(raw: bytes | None) -> Expected:
    if raw is None or raw == b"":
        return Expected("dead_letter", error="empty value")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return Expected("dead_letter", error="not valid UTF-8")
    try:
        doc = parse_strict(text)
    except _Malformed:
        return Expected("dead_letter", error="malformed JSON")
    if not isinstance(doc, dict):
        return Expected("dead_letter", error="not a JSON object")
    errors = _field_errors(doc)
    if errors:
        return Expected("dead_letter", error="; ".join(errors))
    matched = _matches(doc)
    if not matched:
        return Expected("none", event_id=doc["event_id"])
    severity = max((s for _r, s in matched), key=SEVERITY_ORDER.__getitem__)
    return Expected("alert", event_id=doc["event_id"], severity=severity,
                    rules=tuple(r for r, _s in matched), event=doc)


def error_heads(error: str) -> str:
    """A dead letter's reason without Spark's type names (``..., got bigint``)."""
    return "; ".join(part.split(", got ")[0] for part in error.split("; "))
