"""Optional durability: append-only segment files per partition, and crash recovery.

Layout: ``DATA_DIR/topics/<topic>/topic.json`` and ``.../<partition>/<base offset>.log``.
Each batch is framed as ``[u32 length][u32 crc32][batch]`` so recovery can tell a torn
tail (process or machine died mid-write) from good data and cut it off. Acknowledged
batches were written with ``write()`` before the response left (flush="write": survives
kill -9, the page cache is the kernel's), optionally fsync'ed per produce or per interval.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import uuid
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from appliance.broker.config import BrokerConfig
from appliance.broker.records import BatchError, BatchHeader, base_offset_of, read_header
from appliance.logs import get_logger

log = get_logger("appliance.broker")
_FRAME = struct.Struct(">II")
SUFFIX = ".log"
START_CHECKPOINT = "log-start-offset"


class RecoveredBatch(NamedTuple):
    """One intact batch read back from a segment file."""

    batch: bytes
    header: BatchHeader
    base_offset: int
    written_ms: int  # the segment file's mtime: no batch in it is newer


@dataclass(frozen=True)
class RecoveredPartition:
    index: int
    segments: PartitionSegments
    log_start: int  # checkpointed log start offset (retention), 0 if none


@dataclass(frozen=True)
class RecoveredTopic:
    """What the data directory says of one topic; the registry rebuilds it from this."""

    name: str
    topic_id: bytes
    configs: dict[str, str]
    partitions: list[RecoveredPartition]


def _segment_name(base: int) -> str:
    return f"{base:020d}{SUFFIX}"


class PartitionSegments:
    """The segment files of one partition; only the newest one is appended to."""

    def __init__(self, directory: Path, segment_bytes: int) -> None:
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self.segment_bytes = segment_bytes
        self.bases: list[int] = sorted(int(p.name[:-len(SUFFIX)])
                                       for p in self.dir.glob("*" + SUFFIX))
        self._fd: int | None = None
        self._size = 0
        self.dirty = False

    def _open_active(self, base: int) -> None:
        if self._fd is not None:
            os.close(self._fd)
        path = self.dir / _segment_name(base)
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._size = os.fstat(self._fd).st_size
        if not self.bases or self.bases[-1] != base:
            self.bases.append(base)

    def append(self, batch: bytes, base: int) -> None:
        if self._fd is None or self._size >= self.segment_bytes:
            self._open_active(base)
        head = _FRAME.pack(len(batch), zlib.crc32(batch))
        n = os.writev(self._fd, [head, batch])
        if n != len(head) + len(batch):  # a short write: disk full; fail loudly, ack nothing
            raise OSError(f"short write to {self.dir}: {n} bytes")
        self._size += n
        self.dirty = True

    def sync(self) -> None:
        if self._fd is not None and self.dirty:
            os.fsync(self._fd)
            self.dirty = False

    def drop_before(self, offset: int) -> None:
        """Retention moved the log start: checkpoint it, delete whole segments below it.

        Files go a segment at a time (never the active one); the checkpoint keeps
        recovery from resurrecting the expired batches still inside kept files.
        """
        tmp = self.dir / (START_CHECKPOINT + ".tmp")
        tmp.write_text(str(offset))
        os.replace(tmp, self.dir / START_CHECKPOINT)
        while len(self.bases) > 1 and self.bases[1] <= offset:
            (self.dir / _segment_name(self.bases.pop(0))).unlink(missing_ok=True)

    def checkpointed_log_start(self) -> int:
        try:
            return int((self.dir / START_CHECKPOINT).read_text())
        except (FileNotFoundError, ValueError):
            return 0

    def close(self) -> None:
        if self._fd is not None:
            self.sync()
            os.close(self._fd)
            self._fd = None

    def recover(self) -> Iterator[RecoveredBatch]:
        """Yield every intact frame's batch in offset order; cut torn tails off.

        ``written_ms`` is the segment file's mtime: no batch in it is newer, so time
        retention after a restart errs on the side of keeping data.
        """
        expected: int | None = None
        for i, base in enumerate(list(self.bases)):
            path = self.dir / _segment_name(base)
            data = path.read_bytes()
            written_ms = int(path.stat().st_mtime * 1000)
            pos, good = 0, True
            while pos < len(data):
                if len(data) - pos < _FRAME.size:
                    good = False
                    break
                length, crc = _FRAME.unpack_from(data, pos)
                batch = data[pos + _FRAME.size:pos + _FRAME.size + length]
                if len(batch) != length or zlib.crc32(batch) != crc:
                    good = False
                    break
                try:
                    header = read_header(batch)
                except (BatchError, struct.error):
                    good = False
                    break
                offset = base_offset_of(batch)
                if expected is not None and offset != expected:
                    good = False
                    break
                expected = offset + header.last_offset_delta + 1
                yield RecoveredBatch(batch, header, offset, written_ms)
                pos += _FRAME.size + length
            if not good:
                log.warning("broker.recovery_truncated", segment=str(path),
                            kept_bytes=pos, dropped_bytes=len(data) - pos)
                with open(path, "r+b") as f:
                    f.truncate(pos)
                    f.flush()
                    os.fsync(f.fileno())
                for later in self.bases[i + 1:]:
                    (self.dir / _segment_name(later)).unlink(missing_ok=True)
                del self.bases[i + 1:]
                return


class Storage:
    """All durable state of the broker under one data directory."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.root = Path(config.data_dir or ".") / "topics"
        self.root.mkdir(parents=True, exist_ok=True)
        self._partitions: list[PartitionSegments] = []
        self._timer = None

    # -- topics ---------------------------------------------------------------------------

    def save_topic(self, name: str, topic_id: bytes, partitions: int,
                   configs: dict[str, str]) -> None:
        d = self.root / name
        d.mkdir(parents=True, exist_ok=True)
        tmp = d / "topic.json.tmp"
        tmp.write_text(json.dumps({"name": name, "topic_id": topic_id.hex(),
                                   "partitions": partitions, "configs": configs}))
        os.replace(tmp, d / "topic.json")

    def open_partition(self, topic: str, index: int,
                       segment_bytes: int | None = None) -> PartitionSegments:
        segs = PartitionSegments(self.root / topic / str(index),
                                 segment_bytes or self.config.segment_bytes)
        self._partitions.append(segs)
        return segs

    def delete_topic(self, name: str) -> None:
        d = self.root / name
        if not d.exists():
            return
        for segs in self._partitions:
            if segs.dir.is_relative_to(d):
                segs.close()
        self._partitions = [p for p in self._partitions if not p.dir.is_relative_to(d)]
        gone = self.root.parent / f"deleted-{name}-{uuid.uuid4().hex[:8]}"
        os.replace(d, gone)  # atomic: a crash never leaves a half-deleted topic behind
        shutil.rmtree(gone, ignore_errors=True)

    def recover(self) -> Iterator[RecoveredTopic]:
        """Every topic in the data directory, its partitions' segment files opened.

        Only reads: building topics and partition logs from this is the registry's job
        (``TopicRegistry.recover``); a topic deleted mid-way by a crash is cleaned up here.
        """
        for leftover in self.root.parent.glob("deleted-*"):
            shutil.rmtree(leftover, ignore_errors=True)
        for meta_path in sorted(self.root.glob("*/topic.json")):
            meta = json.loads(meta_path.read_text())
            partitions = []
            for index in range(meta["partitions"]):
                segs = self.open_partition(meta["name"], index)
                partitions.append(RecoveredPartition(index, segs, segs.checkpointed_log_start()))
            yield RecoveredTopic(meta["name"], bytes.fromhex(meta["topic_id"]),
                                 meta.get("configs", {}), partitions)

    # -- flushing -------------------------------------------------------------------------

    def after_produce(self, touched: list[PartitionSegments]) -> None:
        if self.config.flush == "fsync":
            for segs in touched:
                segs.sync()

    def start(self, loop) -> None:
        if self.config.flush == "interval":
            self._timer = loop.call_later(self.config.flush_interval_ms / 1000.0,
                                          self._interval_flush, loop)

    def _interval_flush(self, loop) -> None:
        for segs in self._partitions:
            segs.sync()
        self._timer = loop.call_later(self.config.flush_interval_ms / 1000.0,
                                      self._interval_flush, loop)

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        for segs in self._partitions:
            segs.close()
