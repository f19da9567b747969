"""The one-pass record reader against the validation it replaced, record by record.

``appliance.query.pipeline.parse_events`` reads each record once (``EventReader``, a Java
expression in the connector jar). Its verdicts and reason strings must be exactly those of
the validation built from Spark's JSON functions (``reference_validation``: two wrapped
parses, ``schema_of_variant`` per field, ``from_json``), including the ``, got <type>`` tail
the hostile-input oracle does not look at, and a valid event's typed fields must be the
same values. Both run over the same batch DataFrame (no broker): hostile records from the
fuzzer's strategy, byte-level mutations of valid events, and the edge cases where the two
could part (read limits, the nesting depth the old wraps took one level of, encodings
Jackson sniffs, lone surrogates outside the event's own fields).
"""

from __future__ import annotations

import datetime
import json
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_hostile_input import records

from appliance.events import FIELD_NAMES, FIELDS
from appliance.query.pipeline import KAFKA_READ_SCHEMA, parse_events

from support.faults import reference_validation
from support.faults.fault_knobs import LONG, knob

pytestmark = pytest.mark.spark

COLUMNS = ["_offset", "_utf8", "error", *FIELD_NAMES]
NUMBERS = {f.name for f in FIELDS if f.spark_type == "double"}


def _event(**extra) -> dict:
    return {"event_id": "e-1", "ts": 1, "source": "s", "metric": "cpu", "value": 2.5, **extra}


def _with_raw(field: str, literal: str, **extra) -> bytes:
    """A valid event whose ``field`` holds ``literal`` verbatim (any JSON text, or not)."""
    marker = "@@raw@@"
    return json.dumps(_event(**{field: marker}, **extra)).replace(
        json.dumps(marker), literal).encode()


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def _same_double(a, b) -> bool:
    return a is b is None or (a is not None and b is not None
                              and struct.pack(">d", a) == struct.pack(">d", b))


def assert_same_verdicts(spark, values: list[bytes | None]) -> None:
    now = datetime.datetime.now()
    frame = spark.createDataFrame([(None, v, "events", 0, i, now, 0)
                                   for i, v in enumerate(values)], KAFKA_READ_SCHEMA)
    new = {r._offset: r for r in parse_events(frame).select(*COLUMNS).collect()}
    old = {r._offset: r for r in
           reference_validation.parse_events(frame).select(*COLUMNS).collect()}
    for i, value in enumerate(values):
        got, want = new[i], old[i]
        assert (got.error, got._utf8) == (want.error, want._utf8), value
        if want.error is not None:
            continue
        for name in FIELD_NAMES:
            if name in NUMBERS:
                assert _same_double(got[name], want[name]), (name, value, got, want)
            else:
                assert got[name] == want[name], (name, value, got, want)


EDGES: dict[str, bytes | None] = {
    "tombstone": None, "empty": b"", "space": b" ", "whitespace": b" \t\r\n",
    "vertical-tab": b"\x0b{}", "form-feed": b"{}\x0c", "nbsp": "\u00a0{}".encode(),
    "valid": json.dumps(_event(tags={"env": "prod"})).encode(),
    "no-tags": json.dumps(_event()).encode(), "empty-object": b"{}",
    "whitespace-around": b" \r\n" + json.dumps(_event()).encode() + b"\t ",
    # what Jackson's encoding sniffing would read otherwise
    "bom": b"\xef\xbb\xbf" + json.dumps(_event()).encode(), "bom-empty": b"\xef\xbb\xbf{}",
    "space-bom": b" \xef\xbb\xbf{}", "utf32be": b"\x00\x00\x00[\x00\x00\x00]",
    "utf32le": b"[\x00\x00\x00]\x00\x00\x00", "utf16be": b"\x00[\x00]", "utf16le": b"[\x00]\x00",
    "nul-first": b"\x00{}", "nul-fourth": b"{  \x00}", "nul-late": b'{"a":"\x00"}',
    "nul-late-object": b'{"a": 1}\x00',
    # not UTF-8
    "overlong": b'{"a":"\xc0\x80"}', "cesu-surrogate": b'{"a":"\xed\xa0\x80"}',
    "truncated-utf8": b'{"a":"\xe2\x82"}', "latin1": b'{"a":"\xe9"}',
    "four-byte": '{"a":"\U0001f525"}'.encode(),
    # lone surrogates in every place
    "surrogate-unknown-value": _with_raw("extra", '"\\ud800"'),
    "surrogate-unknown-key": b'{"\\udfff": 1, ' + json.dumps(_event()).encode()[1:],
    "surrogate-nested-key": _with_raw("extra", '{"a": [{"\\uDBFF": 1}]}'),
    "surrogate-tags-key": _with_raw("tags", '{"\\ud800": "x"}'),
    "surrogate-tags-value": _with_raw("tags", '{"k": "\\udc00"}'),
    "surrogate-pair": _with_raw("source", '"\\ud83d\\ude00"'),
    "surrogate-reversed": _with_raw("source", '"\\ude00\\ud83d"'),
    "surrogate-in-wrong-type": _with_raw("ts", '["\\ud800"]'),
    "surrogate-escaped-backslash": _with_raw("source", '"\\\\ud800"'),
    "surrogate-top-string": b'"\\ud800"', "surrogate-top-array": b'["\\ud800"]',
    # escapes and strings the skipped values must still check
    "bad-escape-unknown": _with_raw("extra", '"\\x41"'),
    "short-unicode-escape": _with_raw("extra", '"\\u12"'),
    "control-char-unknown": _with_raw("extra", '"a\tb"'),
    "escaped-key": b'{"event\\u005fid": "e", "ts": 1, "source": "s", "metric": "m", "value": 1}',
    "upper-case-key": b'{"EVENT_ID": "e", "ts": 1, "source": "s", "metric": "m", "value": 1}',
    # duplicates anywhere
    "duplicate-top": b'{"a": 1, "a": 2}',
    "duplicate-field": _with_raw("extra", '1, "event_id": "x"'),
    "duplicate-nested": _with_raw("extra", '[{"k": 1, "k": 1}]'),
    "duplicate-escaped": _with_raw("extra", '{"a": 1, "\\u0061": 2}'),
    "duplicate-in-tags": _with_raw("tags", '{"k": "a", "k": "b"}'),
    "duplicate-in-wrong-type": _with_raw("ts", '{"k": 1, "k": 2}'),
    # the nesting limit: the old wraps took one level, so 999 is the deepest record
    **{f"depth-{d}": _with_raw("extra", _nested(d - 1)) for d in (998, 999, 1000, 1001)},
    **{f"top-depth-{d}": _nested(d).encode() for d in (998, 999, 1000, 1001)},
    "deep-wrong-type": _with_raw("ts", _nested(998)),
    # read limits
    "number-1000-digits": _with_raw("value", "1" * 1000),
    "number-1001-digits": _with_raw("value", "1" * 1001),
    "unknown-number-1001-digits": _with_raw("extra", "1" * 1001),
    "fraction-1000": _with_raw("extra", "0." + "1" * 998),
    "fraction-1001": _with_raw("extra", "0." + "1" * 999),
    "name-50000": _with_raw("k" * 50000, "1"), "name-50001": _with_raw("k" * 50001, "1"),
    # numbers
    **{f"number-{n}": _with_raw("value", n) for n in (
        "1E2", "1e-400", "-1e400", "1e400", "1.0e+2", "-0", "-0.0", "0.1e-400", "1" * 400,
        "12345678901234567890", "123456789012345678901234567890123456789012", "1e308",
        "-1.7976931348623157e308", "5e-324", "4.9e-325", "0.1", "9007199254740993",
        "0.30000000000000004", "1." + "0" * 37, "1." + "0" * 38, "00", "01", "+1", ".5",
        "1.", "-", "1e", "NaN", "Infinity", "-Infinity", "0x10", "1_000")},
    "ts-huge-int": _with_raw("ts", "1" * 400),
    # wrong types, and how the reason renders them
    **{f"wrong-{i}": _with_raw(field, literal) for i, (field, literal) in enumerate([
        ("ts", '"12"'), ("ts", "true"), ("value", "false"), ("value", "[]"),
        ("value", "[1, 2.5]"), ("value", '[1, "a"]'), ("value", '{"b": [{}]}'),
        ("value", '{"z": 1, "a": 2}'), ("event_id", "1"), ("event_id", "-129"),
        ("event_id", "40000"), ("event_id", "3000000000"), ("event_id", "2.50"),
        ("event_id", "1e5"), ("source", '{"\u00c9": 1}'), ("source", '{"\u01c5": 1}'),
        ("source", '{"a b": 1, "`c`": [null]}'), ("metric", "[[[1]]]"), ("metric", "[null]"),
        ("metric", "[1, 1.5, 1e5]"), ("metric", '[{"a": 1}, {"b": "x"}]'),
        ("tags", '"x"'), ("tags", "[]"), ("tags", "1"), ("tags", '{"a": null}'),
        ("tags", '{"a": {"b": "c"}}'), ("tags", '{"a": 1, "b": "c"}'), ("tags", "{}"),
        ("tags", "null"), ("event_id", "null"), ("value", "null")])},
    "all-wrong": b'{"event_id": 1, "ts": "x", "source": [1, "a"], "metric": {"a": 1.5}, '
                 b'"value": 1e400, "tags": {"x": 1}}',
    "all-missing-but-one": b'{"source": "s"}',
    # not JSON, or more than one value
    **{f"syntax-{i}": s for i, s in enumerate([
        b"{'event_id': 'x'}", b'{"a": 1,}', b'{"a": 1 /* c */}', b"{a: 1}", b'{"a" 1}',
        b'{"a": 1} x', b'{"a": 1}{}', b'{"a": 1},0]', b'{"a": 1},0] x', b'{"a": 1}, "k": 1',
        b'{"a": 1}]', b'{"a": 1}}', b'{"a": 1} {"b": 2}', b'{"a": 1', b'{"a": "b', b"[1,2] 3",
        b"1 2", b"12x", b"tru", b"nul", b'"unterminated', b"[", b"]", b"}", b",", b":",
        b'{"a": 1}\n\n', b"true", b"null", b"-0", b'"text"', b"[]", b"[{}]"])},
}


def test_edge_cases_get_the_same_verdict(spark):
    assert_same_verdicts(spark, list(EDGES.values()))


@st.composite
def mutated_events(draw) -> bytes:
    """A valid event with a few bytes replaced, inserted or deleted, mostly JSON syntax."""
    raw = bytearray(json.dumps(_event(tags={"env": "prod"}, extra=[1, {"k": "v"}])).encode())
    alphabet = st.sampled_from(list(b'{}[]",:\\u0123456789abcdefDEeE+-. \t\n\r\x00\xff\xc3') +
                               [0x80, 0xef])
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(raw)))
        action = draw(st.sampled_from(["replace", "insert", "delete"]))
        if action == "insert" or at == len(raw):
            raw[at:at] = bytes([draw(alphabet)])
        elif action == "replace":
            raw[at] = draw(alphabet)
        else:
            del raw[at]
    return bytes(raw)


@settings(max_examples=knob(12, 120), deadline=None, derandomize=not LONG, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(values=st.lists(st.one_of(records(), mutated_events()), min_size=1,
                       max_size=knob(150, 400)))
def test_fuzzed_records_get_the_same_verdict(spark, values):
    assert_same_verdicts(spark, values)
