"""A field-by-field interpreter of the broker's schema tables: the reference semantics.

The broker runs code that ``appliance.broker.wire.codegen`` generates from the same tables; this
slow, obvious interpreter exists only so the tests can check the generated code against it
byte for byte. It lives with the tests because nothing in the product uses it.
"""

from __future__ import annotations

import struct
from typing import Any

from appliance.broker.wire.codec import (
    PRIM_DEFAULTS,
    Array,
    DecodeError,
    Field,
    Reader,
    Struct,
    Writer,
)

_U32 = struct.Struct(">I")


# -- primitive (de)serialisers ------------------------------------------------------------


def _decode_prim(t: str, r: Reader, flexible: bool) -> Any:
    if t == "int32":
        return r.int32()
    if t == "int16":
        return r.int16()
    if t == "int64":
        return r.int64()
    if t == "int8":
        return r.int8()
    if t == "bool":
        return r.int8() != 0
    if t in ("string", "nstring"):
        n = r.uvarint() - 1 if flexible else r.int16()
        if n < 0:
            if t == "string":
                raise DecodeError("null where a string is required")
            return None
        try:
            return bytes(r.raw(n)).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DecodeError("string is not UTF-8") from exc
    if t in ("bytes", "nbytes", "records"):
        n = r.uvarint() - 1 if flexible else r.int32()
        if n < 0:
            return None
        return r.raw(n)
    if t == "uuid":
        return bytes(r.raw(16))
    if t == "uint32":
        v = _U32.unpack_from(r.raw(4))[0]
        return v
    raise AssertionError(f"unknown type {t}")


def _encode_prim(t: str, w: Writer, flexible: bool, v: Any) -> None:
    if t == "int32":
        w.int32(v)
    elif t == "int16":
        w.int16(v)
    elif t == "int64":
        w.int64(v)
    elif t == "int8":
        w.int8(v)
    elif t == "bool":
        w.int8(1 if v else 0)
    elif t in ("string", "nstring"):
        if v is None:
            if flexible:
                w.uvarint(0)
            else:
                w.int16(-1)
            return
        b = v.encode("utf-8")
        if flexible:
            w.uvarint(len(b) + 1)
        else:
            w.int16(len(b))
        w.raw(b)
    elif t in ("bytes", "nbytes", "records"):
        if v is None:
            if flexible:
                w.uvarint(0)
            else:
                w.int32(-1)
            return
        chunks = v if isinstance(v, (list, tuple)) else (v,)
        n = sum(len(c) for c in chunks)
        if flexible:
            w.uvarint(n + 1)
        else:
            w.int32(n)
        w.parts.extend(chunks)
    elif t == "uuid":
        w.raw(v if v is not None else bytes(16))
    elif t == "uint32":
        w.raw(_U32.pack(v))
    else:
        raise AssertionError(f"unknown type {t}")


# -- structs -------------------------------------------------------------------------------


def interpret_decode(fields: list[Field], r: Reader, version: int, flexible: bool) -> dict:
    out: dict[str, Any] = {}
    for f in fields:
        if not f.present(version):
            out[f.name] = f.default
            continue
        t = f.type
        if isinstance(t, Struct):
            if t.nullable and r.int8() < 0:
                out[f.name] = None
            else:
                out[f.name] = interpret_decode(t.fields, r, version, flexible)
        elif isinstance(t, Array):
            out[f.name] = _decode_array(t, r, version, flexible)
        else:
            out[f.name] = _decode_prim(t, r, flexible)
    if flexible:
        r.skip_tagged()
    return out


def _decode_array(a: Array, r: Reader, version: int, flexible: bool) -> list | None:
    n = r.uvarint() - 1 if flexible else r.int32()
    if n < 0:
        if not a.nullable:
            raise DecodeError("null where an array is required")
        return None
    if n > r.remaining():  # every element takes at least one byte
        raise DecodeError(f"array length {n} exceeds message")
    if isinstance(a.item, str):
        return [_decode_prim(a.item, r, flexible) for _ in range(n)]
    return [interpret_decode(a.item, r, version, flexible) for _ in range(n)]


def interpret_encode(fields: list[Field], w: Writer, version: int, flexible: bool,
                     value: dict) -> None:
    for f in fields:
        if not f.present(version):
            continue
        v = value.get(f.name, f.default)
        t = f.type
        if isinstance(t, Struct):
            if t.nullable:
                w.int8(-1 if v is None else 1)
                if v is None:
                    continue
            interpret_encode(t.fields, w, version, flexible, v or {})
        elif isinstance(t, Array):
            _encode_array(t, w, version, flexible, v)
        else:
            if v is None and t in PRIM_DEFAULTS:
                v = PRIM_DEFAULTS[t]
            _encode_prim(t, w, flexible, v)
    if flexible:
        w.uvarint(0)


def _encode_array(a: Array, w: Writer, version: int, flexible: bool, v: list | None) -> None:
    if v is None:
        if a.nullable:
            if flexible:
                w.uvarint(0)
            else:
                w.int32(-1)
            return
        v = []
    if flexible:
        w.uvarint(len(v) + 1)
    else:
        w.int32(len(v))
    if isinstance(a.item, str):
        for item in v:
            _encode_prim(a.item, w, flexible, item)
    else:
        for item in v:
            interpret_encode(a.item, w, version, flexible, item)
