"""Kafka wire primitives and the types the schema tables are written in.

One declarative schema per API message (see ``schemas.py``) drives both decoding and
encoding, for every version, in classic and "flexible" (compact + tagged fields) form.
That keeps version differences in one table instead of scattered ``if version >= N``.
This module is the leaf: the schema types (``Field``, ``Array``, ``Schema``), the byte
``Reader``/``Writer`` and ``DecodeError``. ``codegen`` turns schemas into (de)serialisers
and owns the dispatch; record batches travel as opaque bytes and nobody here looks inside.
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


class DecodeError(ValueError):
    """The bytes do not form a valid message for the declared schema/version."""


@dataclass(frozen=True)
class Array:
    """An array of a primitive type name or of a struct (a list of Fields)."""

    item: Any
    nullable: bool = False


@dataclass(frozen=True)
class Struct:
    """A struct-valued field (not an array item): its fields inline; a nullable one
    carries a presence byte first (-1: null, 1: present), as Kafka's nullable structs."""

    fields: Any  # list[Field]
    nullable: bool = False


@dataclass(frozen=True)
class Field:
    name: str
    type: Any  # primitive name (str), Array or Struct
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


# Value a non-nullable primitive takes when a response leaves it None.
PRIM_DEFAULTS = {
    "int8": 0, "int16": 0, "int32": 0, "int64": 0, "bool": False, "string": "",
    "uuid": bytes(16), "uint32": 0,
}


def new_uuid() -> bytes:
    return _uuid.uuid4().bytes
