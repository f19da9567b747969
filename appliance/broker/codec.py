"""Kafka wire primitives and a schema-driven struct codec.

One declarative schema per API message (see ``schemas.py``) drives both decoding and
encoding, for every version, in classic and "flexible" (compact + tagged fields) form.
That keeps version differences in one table instead of scattered ``if version >= N``.
Record batches travel as opaque bytes: the codec never looks inside them.
"""

from __future__ import annotations

import struct
import uuid as _uuid
from dataclasses import dataclass, field
from typing import Any

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U32 = struct.Struct(">I")


class DecodeError(ValueError):
    """The bytes do not form a valid message for the declared schema/version."""


@dataclass(frozen=True)
class Array:
    """An array of a primitive type name or of a struct (a list of Fields)."""

    item: Any
    nullable: bool = False


@dataclass(frozen=True)
class Field:
    name: str
    type: Any  # primitive name (str) or Array
    since: int = 0
    until: int | None = None
    default: Any = None

    def present(self, version: int) -> bool:
        return version >= self.since and (self.until is None or version <= self.until)


@dataclass
class Schema:
    """Both directions of one API: request/response fields and the first flexible version."""

    key: int
    name: str
    min_version: int
    max_version: int
    flexible_since: int
    request: list[Field] = field(default_factory=list)
    response: list[Field] = field(default_factory=list)

    def flexible(self, version: int) -> bool:
        return version >= self.flexible_since


class Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes | memoryview, pos: int = 0) -> None:
        self.buf = buf if isinstance(buf, memoryview) else memoryview(buf)
        self.pos = pos

    def _need(self, n: int) -> None:
        if n < 0 or self.pos + n > len(self.buf):
            raise DecodeError(f"truncated: need {n} bytes at {self.pos} of {len(self.buf)}")

    def int8(self) -> int:
        self._need(1)
        v = _I8.unpack_from(self.buf, self.pos)[0]
        self.pos += 1
        return v

    def int16(self) -> int:
        self._need(2)
        v = _I16.unpack_from(self.buf, self.pos)[0]
        self.pos += 2
        return v

    def int32(self) -> int:
        self._need(4)
        v = _I32.unpack_from(self.buf, self.pos)[0]
        self.pos += 4
        return v

    def int64(self) -> int:
        self._need(8)
        v = _I64.unpack_from(self.buf, self.pos)[0]
        self.pos += 8
        return v

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            self._need(1)
            b = self.buf[self.pos]
            self.pos += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
            if shift > 35:
                raise DecodeError("varint too long")

    def raw(self, n: int) -> memoryview:
        self._need(n)
        v = self.buf[self.pos : self.pos + n]
        self.pos += n
        return v

    def skip_tagged(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.raw(self.uvarint())

    def remaining(self) -> int:
        return len(self.buf) - self.pos


class Writer:
    """Accumulates byte pieces; large record sets are appended without copying."""

    __slots__ = ("parts",)

    def __init__(self) -> None:
        self.parts: list[bytes | memoryview] = []

    def int8(self, v: int) -> None:
        self.parts.append(_I8.pack(v))

    def int16(self, v: int) -> None:
        self.parts.append(_I16.pack(v))

    def int32(self, v: int) -> None:
        self.parts.append(_I32.pack(v))

    def int64(self, v: int) -> None:
        self.parts.append(_I64.pack(v))

    def uvarint(self, v: int) -> None:
        out = bytearray()
        while v > 0x7F:
            out.append((v & 0x7F) | 0x80)
            v >>= 7
        out.append(v)
        self.parts.append(bytes(out))

    def raw(self, b: bytes | memoryview) -> None:
        self.parts.append(b)

    def getvalue(self) -> bytes:
        return b"".join(self.parts)


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


PRIM_DEFAULTS = {
    "int8": 0, "int16": 0, "int32": 0, "int64": 0, "bool": False, "string": "",
    "uuid": bytes(16), "uint32": 0,
}


# -- structs -------------------------------------------------------------------------------


def interpret_decode(fields: list[Field], r: Reader, version: int, flexible: bool) -> dict:
    out: dict[str, Any] = {}
    for f in fields:
        if not f.present(version):
            out[f.name] = f.default
            continue
        t = f.type
        if isinstance(t, Array):
            out[f.name] = _decode_array(t, r, version, flexible)
        else:
            out[f.name] = _decode_prim(t, r, flexible)
    if flexible:
        r.skip_tagged()
    return out


def _decode_array(a: Array, r: Reader, version: int, flexible: bool) -> list | None:
    n = r.uvarint() - 1 if flexible else r.int32()
    if n < 0:
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
        if isinstance(t, Array):
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


_compiled: dict[tuple[int, int, bool, str], Any] = {}


def decode_struct(fields: list[Field], r: Reader, version: int, flexible: bool) -> dict:
    """Decode with code compiled once per (schema, version) (see ``codegen``)."""
    key = (id(fields), version, flexible, "d")
    fn = _compiled.get(key)
    if fn is None:
        from appliance.broker.codegen import compile_decoder

        fn = _compiled[key] = compile_decoder(fields, version, flexible)
    out, r.pos = fn(r.buf, r.pos)
    return out


def encode_struct(fields: list[Field], w: Writer, version: int, flexible: bool,
                  value: dict) -> None:
    key = (id(fields), version, flexible, "e")
    fn = _compiled.get(key)
    if fn is None:
        from appliance.broker.codegen import compile_encoder

        fn = _compiled[key] = compile_encoder(fields, version, flexible)
    fn(w.parts, value)


def new_uuid() -> bytes:
    return _uuid.uuid4().bytes
