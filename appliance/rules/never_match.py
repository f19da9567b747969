"""Rules that type-check but can never match: what a conjunction of comparisons rules out.

``appliance.rules.rule_types`` refuses the comparisons Spark makes null for every event
(a number compared with text that is not one, an IN of mixed types, LIKE on a number); this
finds the rules whose top-level ``AND`` asks for two things no event has at once: a text
field equal to two different values (``metric = 'a' AND metric IN ('b', 'c')``), or a
number inside an empty range (``value > 10 AND value < 5``). The connector's Spark pass
(``io.appliance.rules.NeverMatch``) finds the same in Spark's analyzed rule, so both
checks give one verdict.

Only plain fields and tag entries compared with literals count; anything else (a function
of a field, a collated or cast comparison, an ``OR``) is left alone.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from appliance.events import FIELDS
from appliance.rules import rule_syntax as s
from appliance.rules.sql_types import NUMERIC, STRING, parse_type

_KINDS = {f.name: parse_type(f.spark_type).kind for f in FIELDS}
_MAPS = {f.name for f in FIELDS if parse_type(f.spark_type).kind == "map"}
_NUMBER_LITERALS = ("int", "bigint", "smallint", "tinyint", "double", "float", "decimal")
#: What Spark's cast of text to a number reads (ANSI off): Java's decimal float syntax,
#: after trimming, and the special words; anything else is NULL.
_NUMBER_TEXT = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?[dDfF]?")
_SPECIAL = {"inf", "+inf", "-inf", "infinity", "+infinity", "-infinity", "nan"}


def is_number_text(text: str) -> bool:
    """Whether Spark casts ``text`` to a number rather than to NULL."""
    trimmed = text.strip()
    return trimmed.lower() in _SPECIAL or _NUMBER_TEXT.fullmatch(trimmed) is not None


def text_field(node: s.Node, scope: frozenset[str] = frozenset()) -> str | None:
    """``metric`` or ``tags['env']`` where ``node`` reads a text field or a tag; else None."""
    if isinstance(node, s.Column):
        name = node.name.lower()
        return name if name not in scope and _KINDS.get(name) == STRING else None
    if isinstance(node, s.Subscript) and isinstance(node.base, s.Column) \
            and node.base.name.lower() in _MAPS and node.base.name.lower() not in scope \
            and isinstance(node.index, s.Literal) and node.index.kind == "string":
        return f"{node.base.name.lower()}['{node.index.text}']"
    if isinstance(node, s.Field) and isinstance(node.base, s.Column) \
            and node.base.name.lower() in _MAPS and node.base.name.lower() not in scope:
        return f"{node.base.name.lower()}['{node.name}']"
    return None


def number_field(node: s.Node) -> str | None:
    if isinstance(node, s.Column) and _KINDS.get(node.name.lower()) == NUMERIC:
        return node.name.lower()
    return None


def number_literal(node: s.Node) -> float | None:
    """The value of a number literal (``5``, ``-1.5``, ``1e3D``), else None."""
    if isinstance(node, s.Unary) and node.op in ("-", "+"):
        inner = number_literal(node.operand)
        return None if inner is None else (-inner if node.op == "-" else inner)
    if isinstance(node, s.Literal) and node.kind in _NUMBER_LITERALS:
        try:
            return float(node.text)
        except ValueError:
            return None
    return None


@dataclass
class _Range:
    """What a conjunction allows a number field: bounds (value, inclusive)."""

    low: tuple[float, bool] = (-math.inf, True)
    high: tuple[float, bool] = (math.inf, True)
    said: list[str] = field(default_factory=list)

    def limit(self, op: str, value: float) -> None:
        if op in (">", ">="):
            self.low = max(self.low, (value, op == ">="), key=_low_key)
        if op in ("<", "<="):
            self.high = min(self.high, (value, op == "<="), key=_high_key)
        if op in ("=", "=="):
            self.low = max(self.low, (value, True), key=_low_key)
            self.high = min(self.high, (value, True), key=_high_key)

    def empty(self) -> bool:
        (lo, lo_in), (hi, hi_in) = self.low, self.high
        return lo > hi or (lo == hi and not (lo_in and hi_in))


def _low_key(bound: tuple[float, bool]) -> tuple[float, int]:
    return bound[0], 0 if bound[1] else 1  # > 5 is tighter than >= 5


def _high_key(bound: tuple[float, bool]) -> tuple[float, int]:
    return bound[0], 1 if bound[1] else 0  # < 5 is tighter than <= 5


_FLIP = {">": "<", ">=": "<=", "<": ">", "<=": ">=", "=": "=", "==": "=="}


def _conjuncts(node: s.Node) -> list[s.Node]:
    if isinstance(node, s.Binary) and node.op == "AND":
        return _conjuncts(node.left) + _conjuncts(node.right)
    return [node]


def _text_values(node: s.Node) -> tuple[str, set[str]] | None:
    """``field = 'x'``, ``field <=> 'x'``, ``field IN ('x', 'y')``: the field and values."""
    if isinstance(node, s.Binary) and node.op in ("=", "==", "<=>"):
        for f, v in ((node.left, node.right), (node.right, node.left)):
            name = text_field(f)
            if name and isinstance(v, s.Literal) and v.kind == "string":
                return name, {v.text}
    if isinstance(node, s.InList) and not node.negated:
        name = text_field(node.value)
        if name and all(isinstance(i, s.Literal) and i.kind in ("string", "null")
                        for i in node.items):
            return name, {i.text for i in node.items if isinstance(i, s.Literal)
                          and i.kind == "string"}
    return None


def _number_bound(node: s.Node) -> tuple[str, str, float] | None:
    """``value > 5``, ``5 <= ts``: the field, the operator as seen from it, the number."""
    if isinstance(node, s.Binary) and node.op in _FLIP:
        name, value = number_field(node.left), number_literal(node.right)
        if name and value is not None:
            return name, node.op, value
        name, value = number_field(node.right), number_literal(node.left)
        if name and value is not None:
            return name, _FLIP[node.op], value
    return None


def _number(value: float) -> str:
    return str(int(value)) if value.is_integer() else repr(value)


def contradiction(tree: s.Node) -> str | None:
    """Why the rule's top-level conjunction can never hold, or None."""
    texts: dict[str, set[str]] = {}
    asked: dict[str, list[str]] = {}
    ranges: dict[str, _Range] = {}
    for conjunct in _conjuncts(tree):
        found = _text_values(conjunct)
        if found:
            name, values = found
            allowed = texts[name] & values if name in texts else values
            listed = sorted(values)
            asked.setdefault(name, []).append(
                repr(listed[0]) if len(listed) == 1 else f"one of {', '.join(map(repr, listed))}")
            if not values:
                return f"can never match: {name} IN lists no value"
            if not allowed:
                return (f"can never match: {name} (a string) cannot be "
                        f"{' and '.join(asked[name])} at once")
            texts[name] = allowed
            continue
        bound = _number_bound(conjunct)
        if bound:
            name, op, value = bound
            span = ranges.setdefault(name, _Range())
            span.limit(op, value)
            span.said.append(f"{op} {_number(value)}")
            if span.empty():
                return (f"can never match: no {name} (a double) is "
                        f"{' and '.join(span.said)}")
    return None
