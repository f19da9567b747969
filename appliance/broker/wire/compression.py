"""Kafka's record-batch codecs, with a cap on what one batch may decompress to.

A batch's records section is compressed as a whole (the attributes' low three bits name
the codec). Decompressing is the one place where a few bytes from a client become many in
the broker: a 5 KB zstd batch of zeros is 100 MB of records. So every decompression here
writes into a buffer of at most ``limit`` bytes and fails past it (``DecompressedTooLarge``)
instead of growing; nothing is allocated beyond the cap. The codecs run in C (cramjam) and
release the interpreter lock, so a caller may run them in a worker thread.

Snappy comes in two framings: Java's clients write xerial's (a 16-byte header, then sized
blocks), librdkafka and kafka-python either; both are read, and xerial's is written (what
every client reads). LZ4 is the LZ4 frame format, gzip and zstd their standard frames.
"""

from __future__ import annotations

import enum
import struct

import cramjam

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)  # version 1, compatible 1
_XERIAL_BLOCK = 32 * 1024  # what Java's SnappyOutputStream writes per block
_I32 = struct.Struct(">i")


class Codec(enum.IntEnum):
    """The attributes' codec bits, with Kafka's ``compression.type`` names."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @property
    def config_name(self) -> str:
        return "uncompressed" if self is Codec.NONE else self.name.lower()


CONFIG_NAMES = {c.config_name: c for c in Codec}


class CompressionError(ValueError):
    """The bytes are not a valid stream of the codec."""


class DecompressedTooLarge(CompressionError):
    """The batch decompresses to more than the cap allows."""


def _bounded(module, data: bytes | memoryview, limit: int) -> memoryview:
    """Into one buffer of ``limit`` bytes, returned as a view of what was written (no
    second copy)."""
    out = bytearray(limit)
    try:
        n = module.decompress_into(bytes(data), out)
    except cramjam.DecompressionError as exc:
        if "whole buffer" in str(exc) or "smaller than required" in str(exc):
            raise DecompressedTooLarge(f"decompresses to more than {limit} bytes") from None
        raise CompressionError(str(exc)) from None
    return memoryview(out)[:n]


def _snappy_raw(data: bytes | memoryview, limit: int) -> bytes:
    try:
        size = cramjam.snappy.decompress_raw_len(bytes(data))
    except cramjam.DecompressionError as exc:
        raise CompressionError(str(exc)) from None
    if size > limit:
        raise DecompressedTooLarge(f"decompresses to {size} bytes, more than {limit}")
    try:
        return bytes(cramjam.snappy.decompress_raw(bytes(data)))
    except cramjam.DecompressionError as exc:
        raise CompressionError(str(exc)) from None


def _snappy(data: bytes | memoryview, limit: int) -> bytes | memoryview:
    raw = bytes(data)
    if not raw.startswith(_XERIAL_MAGIC):
        return _snappy_raw(raw, limit)
    out: list[bytes] = []
    total, pos = 0, 16
    while pos < len(raw):
        if pos + 4 > len(raw):
            raise CompressionError("truncated xerial snappy block header")
        n = _I32.unpack_from(raw, pos)[0]
        if n < 0 or pos + 4 + n > len(raw):
            raise CompressionError("xerial snappy block runs past the data")
        block = _snappy_raw(raw[pos + 4:pos + 4 + n], limit - total)
        total += len(block)
        out.append(block)
        pos += 4 + n
    return b"".join(out)


def decompress(codec: int, data: bytes | memoryview, limit: int) -> bytes | memoryview:
    """The records section of a compressed batch; at most ``limit`` bytes, else raises
    DecompressedTooLarge (CompressionError for bad bytes or an unknown codec)."""
    if codec == Codec.GZIP:
        return _bounded(cramjam.gzip, data, limit)
    if codec == Codec.SNAPPY:
        return _snappy(data, limit)
    if codec == Codec.LZ4:
        return _bounded(cramjam.lz4, data, limit)
    if codec == Codec.ZSTD:
        return _bounded(cramjam.zstd, data, limit)
    raise CompressionError(f"unknown compression codec {codec}")


def compress(codec: Codec, data: bytes | memoryview) -> bytes:
    """``data`` compressed as Kafka's clients expect for ``codec`` (NONE: unchanged)."""
    if codec is Codec.NONE:
        return bytes(data)
    if codec is Codec.GZIP:
        return bytes(cramjam.gzip.compress(data))
    if codec is Codec.SNAPPY:
        parts = [_XERIAL_HEADER]
        for i in range(0, len(data), _XERIAL_BLOCK):
            block = bytes(cramjam.snappy.compress_raw(data[i:i + _XERIAL_BLOCK]))
            parts += (_I32.pack(len(block)), block)
        return b"".join(parts)
    if codec is Codec.LZ4:  # independent blocks: Java's reader refuses linked ones
        compressor = cramjam.lz4.Compressor(block_linked=False)
        compressor.compress(data if isinstance(data, bytes) else bytes(data))
        return bytes(compressor.finish())
    return bytes(cramjam.zstd.compress(data))
