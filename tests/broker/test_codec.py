"""The compiled (de)serialisers agree byte for byte with the reference interpreter."""

from __future__ import annotations

import traceback

import pytest

from appliance.broker.wire import schemas
from appliance.broker.wire.codec import Array, DecodeError, Reader, Struct, Writer
from appliance.broker.wire.codegen import EncodeError, decode_struct, encode_struct

from support.broker.codec_reference import interpret_decode, interpret_encode

_SAMPLES = {"int8": -3, "int16": 300, "int32": -70000, "int64": 1 << 40, "bool": True,
            "string": "héllo", "nstring": None, "bytes": b"\x00\x01", "nbytes": b"xyz",
            "records": b"r" * 200, "uuid": bytes(range(16)), "uint32": 4_000_000_000}


def _sample(fields, depth=0) -> dict:
    out = {}
    for f in fields:
        t = f.type
        if isinstance(t, Struct):
            out[f.name] = _sample(t.fields, depth + 1)
        elif isinstance(t, Array):
            if isinstance(t.item, str):
                out[f.name] = [_SAMPLES[t.item]] * 2
            else:
                out[f.name] = [_sample(t.item, depth + 1) for _ in range(2)]
        else:
            out[f.name] = _SAMPLES[t]
    return out


def _norm(v):
    if isinstance(v, memoryview):
        return bytes(v)
    if isinstance(v, dict):
        return {k: _norm(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_norm(x) for x in v]
    return v


CASES = [(s, direction, v) for s in schemas.BY_KEY.values()
         for direction in ("request", "response")
         for v in range(s.min_version, s.max_version + 1)]


@pytest.mark.parametrize("schema,direction,version", CASES,
                         ids=[f"{s.name}-{d}-v{v}" for s, d, v in CASES])
def test_compiled_codec_matches_interpreter(schema, direction, version):
    fields = getattr(schema, direction)
    flexible = schema.flexible(version)
    value = _sample(fields)
    w1, w2 = Writer(), Writer()
    interpret_encode(fields, w1, version, flexible, value)
    encode_struct(fields, w2, version, flexible, value)
    data = w1.getvalue()
    assert w2.getvalue() == data
    r1, r2 = Reader(data), Reader(data)
    got1 = _norm(interpret_decode(fields, r1, version, flexible))
    got2 = _norm(decode_struct(fields, r2, version, flexible))
    assert got1 == got2
    assert r1.pos == r2.pos == len(data)
    for cut in sorted({c for c in (1, len(data) // 2, len(data) - 1) if 0 <= c < len(data)}):
        with pytest.raises(DecodeError):
            decode_struct(fields, Reader(data[:cut]), version, flexible)


def _metadata_v12() -> tuple[list, int]:
    return schemas.METADATA.response, 12


def test_lenient_encoding_fills_defaults_for_missing_keys():
    fields, version = _metadata_v12()
    w = Writer()
    encode_struct(fields, w, version, True, {"brokers": [], "topics": []})
    out = decode_struct(fields, Reader(w.getvalue()), version, True)
    assert out["throttle_time_ms"] == 0 and out["topics"] == []


def test_strict_encoding_rejects_a_misspelt_key():
    fields, version = _metadata_v12()
    value = _sample(fields)
    value["throtle_time_ms"] = value.pop("throttle_time_ms")
    with pytest.raises(EncodeError, match="throtle_time_ms"):
        encode_struct(fields, Writer(), version, True, value, "MetadataResponse", strict=True)


def test_strict_encoding_rejects_a_missing_nested_key():
    fields, version = _metadata_v12()
    value = _sample(fields)
    del value["topics"][1]["partitions"][0]["leader_id"]
    with pytest.raises(EncodeError, match="leader_id"):
        encode_struct(fields, Writer(), version, True, value, "MetadataResponse", strict=True)


def test_strict_encoding_accepts_keys_of_other_versions():
    """A handler may build one body for every version: keys absent in this one are fine."""
    fields, version = schemas.METADATA.response, 1
    value = _sample(fields)  # carries every field of every version
    w = Writer()
    encode_struct(fields, w, version, False, value, "MetadataResponse", strict=True)
    assert decode_struct(fields, Reader(w.getvalue()), version, False)["brokers"]


def test_generated_code_shows_in_tracebacks():
    fields, version = _metadata_v12()
    try:
        encode_struct(fields, Writer(), version, True, {"brokers": None, "topics": [{}]},
                      "MetadataResponse", strict=True)
    except EncodeError as exc:
        frames = traceback.extract_tb(exc.__traceback__)
    generated = [f for f in frames if f.filename.startswith("<codegen MetadataResponse")]
    assert generated and generated[-1].line  # the generated source line is readable
