"""Optional durability: append-only segment files per partition, and crash recovery.

Layout: ``DATA_DIR/topics/<topic>/topic.json`` and ``.../<partition>/<base offset>.log``;
bytes recovery could not read are kept in ``.../<partition>/quarantine/``.

Appends are all or nothing. A produce's batches for one partition go to the active
segment in one ``writev``; if that fails or writes short (disk full, I/O error), the file
is truncated back to its last whole frame, nothing is kept in memory, and the produce
fails with a retriable storage error. The next append simply tries again, so produces
succeed as soon as space returns, and no torn frame is ever left between good ones.

When an acknowledged batch is on stable storage is the flush policy's (``settings.Flush``):
``write`` leaves it to the kernel, ``fsync`` syncs the data and any new segment's
directory entry before the ack, ``interval`` syncs both on a timer. Topic metadata and
the retention checkpoint are always written durably (``durable_io``).

Recovery (``segment_scan``) keeps every valid frame at its offset. Bytes that are not a
valid frame (a write torn by a crash, a damaged sector) are copied to a quarantine file
and reported (``broker.recovery_quarantined``, ``broker_recovery_quarantined_bytes``);
the frames after them stay, and are served at their offsets.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from appliance.broker.settings import BrokerConfig, Flush
from appliance.broker.storage.durable_io import (
    TMP_SUFFIX,
    StorageError,
    fsync_dir,
    make_dir,
    make_dirs,
    replace_file,
)
from appliance.broker.storage.segment_scan import SegmentScan, frame_head, scan
from appliance.broker.wire.records import BatchHeader
from appliance.logs import get_logger

log = get_logger("appliance.broker")
SUFFIX = ".log"
START_CHECKPOINT = "log-start-offset"
QUARANTINE = "quarantine"


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


@dataclass
class StorageStats:
    """What went wrong with the data directory since start (``broker_*`` metrics)."""

    quarantined_regions: int = 0  # byte ranges recovery found not to be valid frames
    quarantined_bytes: int = 0
    append_errors: dict[str, int] = field(default_factory=dict)  # errno name -> refused
    flush_errors: int = 0  # interval/close fsyncs that failed (after the ack)

    def append_failed(self, exc: StorageError) -> None:
        self.append_errors[exc.errno_name] = self.append_errors.get(exc.errno_name, 0) + 1


def _segment_name(base: int) -> str:
    return f"{base:020d}{SUFFIX}"


class PartitionSegments:
    """The segment files of one partition; only the newest one is appended to."""

    def __init__(self, directory: Path, segment_bytes: int, flush: Flush,
                 stats: StorageStats) -> None:
        self.dir = directory
        self.segment_bytes = segment_bytes
        self.flush = flush
        self.stats = stats
        self.bases: list[int] = sorted(int(p.name[:-len(SUFFIX)])
                                       for p in self.dir.glob("*" + SUFFIX))
        self._fd: int | None = None
        self._path: Path | None = None
        self._size = 0  # bytes of whole frames in the active segment
        self._torn = False  # a failed undo left bytes past _size: retry before appending
        self.dirty = False  # data written but not yet fsynced
        self._dir_dirty = False  # a new segment's name not yet fsynced

    # -- appending ----------------------------------------------------------------------

    def _roll(self, base: int) -> None:
        """Make the segment starting at ``base`` the active one (created if new)."""
        path = self.dir / _segment_name(base)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        except OSError as exc:
            raise StorageError("create segment", path, exc) from exc
        if self._fd is not None:
            if self.dirty and self.flush is Flush.INTERVAL:
                self.sync_or_report()  # its data was acknowledged: sync before letting go
            os.close(self._fd)
        self._fd, self._path, self._torn = fd, path, False
        self._size = os.fstat(fd).st_size
        if not self.bases or self.bases[-1] != base:
            self.bases.append(base)
            self._dir_dirty = self.flush is not Flush.WRITE

    def append(self, batches: list[tuple[bytes, int]]) -> None:
        """Write ``(batch, base offset)`` frames to the active segment, all or none.

        Raises StorageError after undoing a failed or short write: the segment then ends
        at its last whole frame again. Under ``Flush.FSYNC`` the frames (and a new
        segment's name) are on stable storage when this returns.
        """
        if self._torn:
            self._undo()
        if self._fd is None or self._size >= self.segment_bytes:
            self._roll(batches[0][1])
        assert self._fd is not None and self._path is not None
        parts: list[bytes] = []
        for batch, _base in batches:
            parts += (frame_head(batch), batch)
        total = sum(map(len, parts))
        try:
            written = os.writev(self._fd, parts)
        except OSError as exc:
            self._undo()
            raise StorageError("write", self._path, exc) from exc
        if written != total:  # the rest would fail with ENOSPC: do not wait to find out
            self._undo()
            raise StorageError("write", self._path,
                               detail=f"short write, {written} of {total} bytes (disk full?)")
        if self.flush is Flush.FSYNC:
            try:
                os.fdatasync(self._fd)
                if self._dir_dirty:
                    fsync_dir(self.dir)
                    self._dir_dirty = False
            except OSError as exc:
                self._undo()
                raise StorageError("fsync", self._path, exc) from exc
        else:
            self.dirty = True
        self._size += written

    def _undo(self) -> None:
        """Cut the active segment back to its last whole frame."""
        assert self._fd is not None and self._path is not None
        try:
            os.ftruncate(self._fd, self._size)
        except OSError as exc:
            self._torn = True
            raise StorageError("truncate", self._path, exc) from exc
        self._torn = False

    # -- flushing -----------------------------------------------------------------------

    def sync(self) -> None:
        """Make everything written so far durable (raises OSError)."""
        if self._fd is not None and self.dirty:
            os.fdatasync(self._fd)
            self.dirty = False
        if self._dir_dirty:
            fsync_dir(self.dir)
            self._dir_dirty = False

    def sync_or_report(self) -> None:
        """``sync`` where a failure can only be reported: the data was acknowledged."""
        try:
            self.sync()
        except OSError as exc:
            self.stats.flush_errors += 1
            log.error("broker.flush_failed", directory=str(self.dir), error=str(exc))

    def close(self) -> None:
        if self._fd is not None:
            self.sync_or_report()
            os.close(self._fd)
            self._fd = None

    # -- retention ----------------------------------------------------------------------

    def drop_before(self, offset: int) -> None:
        """Retention moved the log start: checkpoint it, delete whole segments below it.

        Files go a segment at a time (never the active one); the checkpoint, durable
        before any file goes, keeps recovery from resurrecting the expired batches still
        inside kept files.
        """
        replace_file(self.dir / START_CHECKPOINT, str(offset).encode())
        while len(self.bases) > 1 and self.bases[1] <= offset:
            (self.dir / _segment_name(self.bases.pop(0))).unlink(missing_ok=True)

    def checkpointed_log_start(self) -> int:
        try:
            return int((self.dir / START_CHECKPOINT).read_text())
        except (FileNotFoundError, ValueError):
            return 0

    # -- recovery -----------------------------------------------------------------------

    def recover(self) -> Iterator[RecoveredBatch]:
        """Yield every valid frame's batch in offset order; quarantine the bad bytes.

        ``written_ms`` is the segment file's mtime: no batch in it is newer, so time
        retention after a restart errs on the side of keeping data.
        """
        for leftover in self.dir.glob("*" + TMP_SUFFIX):  # a crash mid-replace_file
            leftover.unlink(missing_ok=True)
        expected: int | None = None
        for base in list(self.bases):
            path = self.dir / _segment_name(base)
            data = path.read_bytes()
            mtime_ns = path.stat().st_mtime_ns
            found = scan(data, expected)
            if found.bad:
                self._quarantine(path, data, found, mtime_ns)
            for frame in found.frames:
                yield RecoveredBatch(frame.batch, frame.header, frame.base_offset,
                                     mtime_ns // 1_000_000)
            if found.next_offset is not None:
                expected = found.next_offset

    def _quarantine(self, path: Path, data: bytes, found: SegmentScan, mtime_ns: int) -> None:
        """Copy each bad region to its own file under ``quarantine/`` and report it.

        The segment itself is not rewritten: that would need as much free space as the
        segment, and recovery must work on a full disk. A bad region in the middle stays
        where it is (every scan skips it, and finds its copy already made); a torn tail,
        once copied, is cut off, so the next append does not land behind it. Bytes that
        could not be copied are left in place: never destroyed.
        """
        qdir = self.dir / QUARANTINE
        for region in found.bad:
            qpath = qdir / f"{path.name}.{region.start}-{region.end}"
            copied = qpath.exists() and qpath.stat().st_size == region.size
            fields = {}
            if not copied:
                try:
                    make_dir(qdir)
                    replace_file(qpath, data[region.start:region.end])
                    copied = True
                except OSError as exc:
                    fields = {"quarantine_error": str(exc)}
            at_end = region.end == len(data)
            self.stats.quarantined_regions += 1
            self.stats.quarantined_bytes += region.size
            log.warning("broker.recovery_quarantined", segment=str(path),
                        at_byte=region.start, bytes=region.size,
                        quarantine_file=str(qpath) if copied else None,
                        valid_frames_after=sum(1 for f in found.frames
                                               if f.start >= region.end),
                        at_end=at_end, **fields)
            if at_end and copied:
                with open(path, "r+b") as f:
                    f.truncate(region.start)
                    os.fsync(f.fileno())
                os.utime(path, ns=(mtime_ns, mtime_ns))  # what time retention reads

class Storage:
    """All durable state of the broker under one data directory."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.root = Path(config.data_dir or ".") / "topics"
        make_dirs(self.root)
        self.stats = StorageStats()
        self._partitions: list[PartitionSegments] = []
        self._timer = None

    # -- topics ---------------------------------------------------------------------------

    def save_topic(self, name: str, topic_id: bytes, partitions: int,
                   configs: dict[str, str]) -> None:
        """Write the topic's metadata durably: the point where a new topic exists."""
        d = self.root / name
        make_dir(d)
        replace_file(d / "topic.json", json.dumps({
            "name": name, "topic_id": topic_id.hex(), "partitions": partitions,
            "configs": configs}).encode())

    def open_partitions(self, topic: str, indexes: range,
                        segment_bytes: int | None = None) -> list[PartitionSegments]:
        """The partitions' directories, created if missing (one fsync for all);
        ``segment_bytes``: the topic's own ``segment.bytes``, else the broker's."""
        d = self.root / topic
        make_dir(d)
        created = False
        out = []
        for index in indexes:
            pdir = d / str(index)
            try:
                pdir.mkdir()
                created = True
            except FileExistsError:
                pass
            segs = PartitionSegments(pdir, segment_bytes or self.config.segment_bytes,
                                     self.config.flush, self.stats)
            self._partitions.append(segs)
            out.append(segs)
        if created:
            fsync_dir(d)
        return out

    def forget_partitions(self, topic: str, indexes: range) -> None:
        """Undo ``open_partitions`` when the topic change they were for failed."""
        dirs = {self.root / topic / str(i) for i in indexes}
        self._partitions = [p for p in self._partitions if p.dir not in dirs]

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
        fsync_dir(self.root)  # durable before the answer: a power cut must not revive it
        fsync_dir(self.root.parent)
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
            segments = self.open_partitions(meta["name"], range(meta["partitions"]))
            partitions = [RecoveredPartition(i, segs, segs.checkpointed_log_start())
                          for i, segs in enumerate(segments)]
            yield RecoveredTopic(meta["name"], bytes.fromhex(meta["topic_id"]),
                                 meta.get("configs", {}), partitions)

    # -- flushing -------------------------------------------------------------------------

    def start(self, loop) -> None:
        if self.config.flush is Flush.INTERVAL:
            self._timer = loop.call_later(self.config.flush_interval_ms / 1000.0,
                                          self._interval_flush, loop)

    def _interval_flush(self, loop) -> None:
        for segs in self._partitions:
            segs.sync_or_report()
        self._timer = loop.call_later(self.config.flush_interval_ms / 1000.0,
                                      self._interval_flush, loop)

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        for segs in self._partitions:
            segs.close()
