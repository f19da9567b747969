"""Compile message schemas into straight-line Python (de)serialisers, once per version.

Interpreting a schema field by field costs a version check and a type dispatch per field
on every request; the broker's latency floor is set by its per-request Python work, so,
as attrs does for ``__init__``, we generate the specialised code once and reuse it.
This module owns the dispatch (``decode_struct``/``encode_struct``, one compiled function
per schema, version and direction, cached); the tests keep a field-by-field reference
interpreter and check the generated code against it byte for byte. Generated source is
compiled under a readable file name (``<codegen ProduceResponse v9 encode>``) registered
with ``linecache``, so tracebacks and debuggers show the generated lines.

Responses are encoded leniently in production (a field a handler leaves out takes its
schema default, the fast path). With ``APPLIANCE_BROKER_STRICT_ENCODING=1`` (the test
suite sets it) a response that carries a key no version of the schema knows, or lacks a
field of its version whose schema row declares no default, raises ``EncodeError``: a
misspelt key in a handler would otherwise go out on the wire as a silent default. (A row
with a declared default, like Kafka's ``-1`` for "unknown", may be left out on purpose.)
"""

from __future__ import annotations

import linecache
import os
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

STRICT_ENV = "APPLIANCE_BROKER_STRICT_ENCODING"


class EncodeError(ValueError):
    """A response does not match its schema (strict encoding only)."""


def strict_from_env() -> bool:
    return os.environ.get(STRICT_ENV, "").strip().lower() in ("1", "true", "yes")

_S = {t: struct.Struct(">" + c) for t, c in
      (("int8", "b"), ("int16", "h"), ("int32", "i"), ("int64", "q"), ("uint32", "I"))}
_SIZES = {"int8": 1, "int16": 2, "int32": 4, "int64": 8, "uint32": 4}


_NULL16 = b"\xff" * 2
_NULL32 = b"\xff" * 4


def _uvarint(buf, pos: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        if pos >= len(buf):
            raise DecodeError("truncated varint")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift > 35:
            raise DecodeError("varint too long")


def _skip_tagged(buf, pos: int) -> int:
    n, pos = _uvarint(buf, pos)
    for _ in range(n):
        _, pos = _uvarint(buf, pos)
        size, pos = _uvarint(buf, pos)
        pos += size
        if pos > len(buf):
            raise DecodeError("truncated tagged field")
    return pos


def _uvb(v: int) -> bytes:
    out = bytearray()
    while v > 0x7F:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


_ENV: dict[str, Any] = {
    "DecodeError": DecodeError, "_uvarint": _uvarint, "_skip_tagged": _skip_tagged,
    "_uvb": _uvb, "_bytes": bytes, "_str": str, "_len": len, "EncodeError": EncodeError,
    **{f"_U_{t}": s.unpack_from for t, s in _S.items()},
    **{f"_P_{t}": s.pack for t, s in _S.items()},
}


class _Src:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.consts: dict[str, Any] = {}

    def add(self, indent: int, line: str) -> None:
        self.lines.append("    " * indent + line)

    def const(self, value: Any) -> str:
        name = f"_c{len(self.consts)}"
        self.consts[name] = value
        return name


def _compile(src: _Src, env: dict[str, Any], func: str, filename: str):
    """Compile generated source under ``filename`` and make it visible to tracebacks."""
    text = "\n".join(src.lines) + "\n"
    linecache.cache[filename] = (len(text), None, text.splitlines(keepends=True), filename)
    exec(compile(text, filename, "exec"), env)  # noqa: S102 - from our own schema tables
    return env[func]


# -- decoders ------------------------------------------------------------------------------


def _dec_len(src: _Src, ind: int, var: str, flexible: bool, wide: bool) -> None:
    if flexible:  # one-byte varints (lengths < 127) inline; longer ones via the helper
        src.add(ind, f"{var} = buf[pos] - 1")
        src.add(ind, f"if {var} < 127:")
        src.add(ind + 1, "pos += 1")
        src.add(ind, "else:")
        src.add(ind + 1, f"{var}, pos = _uvarint(buf, pos)")
        src.add(ind + 1, f"{var} -= 1")
    else:
        t = "int32" if wide else "int16"
        src.add(ind, f"{var} = _U_{t}(buf, pos)[0]")
        src.add(ind, f"pos += {_SIZES[t]}")


def _dec_prim(src: _Src, ind: int, t: str, dest: str, flexible: bool, d: int) -> None:
    if t in _SIZES:
        src.add(ind, f"{dest} = _U_{t}(buf, pos)[0]")
        src.add(ind, f"pos += {_SIZES[t]}")
    elif t == "bool":
        src.add(ind, f"{dest} = _U_int8(buf, pos)[0] != 0")
        src.add(ind, "pos += 1")
    elif t == "uuid":
        src.add(ind, "if pos + 16 > end: raise DecodeError('truncated uuid')")
        src.add(ind, f"{dest} = _bytes(buf[pos:pos + 16])")
        src.add(ind, "pos += 16")
    elif t in ("string", "nstring", "bytes", "nbytes", "records"):
        n = f"n{d}"
        _dec_len(src, ind, n, flexible, wide=t not in ("string", "nstring"))
        src.add(ind, f"if {n} < 0:")
        if t == "string":
            src.add(ind + 1, "raise DecodeError('null where a string is required')")
        else:
            src.add(ind + 1, f"{dest} = None")
        src.add(ind, "else:")
        src.add(ind + 1, f"if pos + {n} > end: raise DecodeError('truncated field')")
        if t in ("string", "nstring"):
            src.add(ind + 1, f"{dest} = _str(buf[pos:pos + {n}], 'utf-8')")
        else:
            src.add(ind + 1, f"{dest} = buf[pos:pos + {n}]")
        src.add(ind + 1, f"pos += {n}")
    else:
        raise AssertionError(t)


def _dec_struct(src: _Src, ind: int, fields: list[Field], target: str, version: int,
                flexible: bool, d: int) -> None:
    src.add(ind, f"{target} = {{}}")
    for f in fields:
        dest = f"{target}[{f.name!r}]"
        if not f.present(version):
            src.add(ind, f"{dest} = {src.const(f.default)}")
            continue
        t = f.type
        if isinstance(t, Struct):
            target_var = f"s{d}"
            if t.nullable:
                src.add(ind, "if _U_int8(buf, pos)[0] < 0:")
                src.add(ind + 1, "pos += 1")
                src.add(ind + 1, f"{dest} = None")
                src.add(ind, "else:")
                src.add(ind + 1, "pos += 1")
                _dec_struct(src, ind + 1, t.fields, target_var, version, flexible, d + 1)
                src.add(ind + 1, f"{dest} = {target_var}")
            else:
                _dec_struct(src, ind, t.fields, target_var, version, flexible, d + 1)
                src.add(ind, f"{dest} = {target_var}")
            continue
        if not isinstance(t, Array):
            _dec_prim(src, ind, t, dest, flexible, d)
            continue
        n, lst, item = f"n{d}", f"l{d}", f"e{d}"
        _dec_len(src, ind, n, flexible, wide=True)
        src.add(ind, f"if {n} < 0:")
        if t.nullable:
            src.add(ind + 1, f"{dest} = None")
        else:  # as Kafka's parser: a null for a non-nullable array is a malformed request
            src.add(ind + 1, "raise DecodeError('null where an array is required')")
        src.add(ind, "else:")
        src.add(ind + 1, f"if {n} > end - pos: raise DecodeError('array length exceeds message')")
        src.add(ind + 1, f"items -= {n}")
        src.add(ind + 1, "if items < 0: raise DecodeError("
                         "f'more than {max_items} array items in one request')")
        src.add(ind + 1, f"{lst} = []")
        src.add(ind + 1, f"for _ in range({n}):")
        if isinstance(t.item, str):
            _dec_prim(src, ind + 2, t.item, item, flexible, d + 1)
        else:
            _dec_struct(src, ind + 2, t.item, item, version, flexible, d + 1)
        src.add(ind + 2, f"{lst}.append({item})")
        src.add(ind + 1, f"{dest} = {lst}")
    if flexible:
        src.add(ind, "if buf[pos] == 0:")
        src.add(ind + 1, "pos += 1")
        src.add(ind, "else:")
        src.add(ind + 1, "pos = _skip_tagged(buf, pos)")


def compile_decoder(fields: list[Field], version: int, flexible: bool, name: str = "struct"):
    """``fn(buf: memoryview, pos, max_items) -> (dict, pos)``; raises DecodeError on bad
    input, or when the arrays hold more than ``max_items`` items together (what a request
    costs decoded grows with its items, not its bytes: a few bytes per item on the wire
    are a few hundred as Python objects)."""
    src = _Src()
    src.add(0, "def _decode(buf, pos, max_items):")
    src.add(1, "end = _len(buf)")
    src.add(1, "items = max_items")
    src.add(1, "try:")
    _dec_struct(src, 2, fields, "out", version, flexible, 0)
    src.add(1, "except IndexError:")
    src.add(2, "raise DecodeError('truncated message') from None")
    src.add(1, "except _StructError as exc:")
    src.add(2, "raise DecodeError(f'truncated: {exc}') from None")
    src.add(1, "except UnicodeDecodeError as exc:")
    src.add(2, "raise DecodeError('string is not UTF-8') from None")
    src.add(1, "return out, pos")
    env = dict(_ENV, _StructError=struct.error, **src.consts)
    return _compile(src, env, "_decode", f"<codegen {name} v{version} decode>")


# -- encoders ------------------------------------------------------------------------------


def _enc_len(src: _Src, ind: int, expr: str, flexible: bool, wide: bool) -> None:
    if flexible:
        src.add(ind, f"ap(_uvb({expr} + 1))")
    else:
        src.add(ind, f"ap(_P_{'int32' if wide else 'int16'}({expr}))")


def _enc_null(src: _Src, ind: int, flexible: bool, wide: bool) -> None:
    if flexible:
        src.add(ind, "ap(b'\\x00')")
    else:
        src.add(ind, f"ap({src.const(_NULL32 if wide else _NULL16)})")


def _enc_prim(src: _Src, ind: int, t: str, v: str, flexible: bool, d: int) -> None:
    if t in _SIZES:
        src.add(ind, f"ap(_P_{t}({v}))")
    elif t == "bool":
        src.add(ind, f"ap(b'\\x01' if {v} else b'\\x00')")
    elif t == "uuid":
        src.add(ind, f"ap({v})")
    elif t in ("string", "nstring"):
        b = f"b{d}"
        src.add(ind, f"if {v} is None:")
        _enc_null(src, ind + 1, flexible, wide=False)
        src.add(ind, "else:")
        src.add(ind + 1, f"{b} = {v}.encode('utf-8')")
        _enc_len(src, ind + 1, f"_len({b})", flexible, wide=False)
        src.add(ind + 1, f"ap({b})")
    elif t in ("bytes", "nbytes", "records"):
        src.add(ind, f"if {v} is None:")
        _enc_null(src, ind + 1, flexible, wide=True)
        src.add(ind, f"elif {v}.__class__ is list:")
        _enc_len(src, ind + 1, f"sum(map(_len, {v}))", flexible, wide=True)
        src.add(ind + 1, f"parts.extend({v})")
        src.add(ind, "else:")
        _enc_len(src, ind + 1, f"_len({v})", flexible, wide=True)
        src.add(ind + 1, f"ap({v})")
    else:
        raise AssertionError(t)


def _enc_struct(src: _Src, ind: int, fields: list[Field], value: str, version: int,
                flexible: bool, d: int, strict: bool) -> None:
    if strict:
        known = src.const(frozenset(f.name for f in fields))
        src.add(ind, f"if not {known}.issuperset({value}):")
        src.add(ind + 1, f"raise EncodeError(f'unknown keys {{sorted(set({value}) - {known})}}')")
    for f in fields:
        if not f.present(version):
            continue
        t = f.type
        v = f"v{d}"
        if strict and f.default is None:
            src.add(ind, f"if {f.name!r} not in {value}:")
            src.add(ind + 1, f"raise EncodeError({'missing key ' + repr(f.name)!r})")
            src.add(ind, f"{v} = {value}[{f.name!r}]")
        else:
            src.add(ind, f"{v} = {value}.get({f.name!r}, {src.const(f.default)})")
        if isinstance(t, Struct):
            if t.nullable:
                src.add(ind, f"if {v} is None:")
                src.add(ind + 1, "ap(b'\\xff')")
                src.add(ind, "else:")
                src.add(ind + 1, "ap(b'\\x01')")
                _enc_struct(src, ind + 1, t.fields, v, version, flexible, d + 1, strict)
            else:
                src.add(ind, f"if {v} is None: {v} = {{}}")
                _enc_struct(src, ind, t.fields, v, version, flexible, d + 1, strict)
            continue
        if not isinstance(t, Array):
            if t in PRIM_DEFAULTS:
                src.add(ind, f"if {v} is None: {v} = {src.const(PRIM_DEFAULTS[t])}")
            _enc_prim(src, ind, t, v, flexible, d)
            continue
        src.add(ind, f"if {v} is None:")
        if t.nullable:
            _enc_null(src, ind + 1, flexible, wide=True)
        else:
            _enc_len(src, ind + 1, "0", flexible, wide=True)
        src.add(ind, "else:")
        _enc_len(src, ind + 1, f"_len({v})", flexible, wide=True)
        item = f"e{d}"
        src.add(ind + 1, f"for {item} in {v}:")
        if isinstance(t.item, str):
            _enc_prim(src, ind + 2, t.item, item, flexible, d + 1)
        else:
            _enc_struct(src, ind + 2, t.item, item, version, flexible, d + 1, strict)
    if flexible:
        src.add(ind, "ap(b'\\x00')")


def compile_encoder(fields: list[Field], version: int, flexible: bool, name: str = "struct",
                    strict: bool = False):
    """``fn(parts: list, value: dict)``: appends the encoded pieces to ``parts``."""
    src = _Src()
    src.add(0, "def _encode(parts, value):")
    src.add(1, "ap = parts.append")
    _enc_struct(src, 1, fields, "value", version, flexible, 0, strict)
    env = dict(_ENV, **src.consts)
    mode = "encode strict" if strict else "encode"
    return _compile(src, env, "_encode", f"<codegen {name} v{version} {mode}>")


# -- dispatch ------------------------------------------------------------------------------

# (id of the field list, version, flexible, strict) -> compiled function. Schema field
# lists are module-level tables that live as long as the process, so ids are stable.
_decoders: dict[tuple[int, int, bool], Any] = {}
_encoders: dict[tuple[int, int, bool, bool], Any] = {}


UNLIMITED_ITEMS = 1 << 62


def decode_struct(fields: list[Field], r: Reader, version: int, flexible: bool,
                  name: str = "struct", max_items: int = UNLIMITED_ITEMS) -> dict:
    """Decode one struct at ``r.pos``, advancing it; raises DecodeError on bad input or
    more than ``max_items`` array items."""
    key = (id(fields), version, flexible)
    fn = _decoders.get(key)
    if fn is None:
        fn = _decoders[key] = compile_decoder(fields, version, flexible, name)
    out, r.pos = fn(r.buf, r.pos, max_items)
    return out


def encode_struct(fields: list[Field], w: Writer, version: int, flexible: bool, value: dict,
                  name: str = "struct", strict: bool = False) -> None:
    """Append ``value`` encoded; ``strict`` raises EncodeError on missing/unknown keys."""
    key = (id(fields), version, flexible, strict)
    fn = _encoders.get(key)
    if fn is None:
        fn = _encoders[key] = compile_encoder(fields, version, flexible, name, strict)
    fn(w.parts, value)
