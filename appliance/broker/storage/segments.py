"""Optional durability: a partition's segment files, their retention, and crash recovery.

Layout: ``DATA_DIR/topics/<topic>/topic.json`` and ``.../<partition>/<base offset>.log``
with its ``.index`` (``segment_file``); beside them ``log-start-offset`` (where retention
or DeleteRecords moved the log start), ``producer-state`` (idempotent producers as of a
roll), ``recovery-point`` (segments below it are known to be on stable storage); bytes
recovery could not read are kept in ``.../<partition>/quarantine/``.

When an acknowledged batch is on stable storage is the flush policy's (``settings.Flush``):
``write`` leaves it to the kernel, ``fsync`` syncs the data and any new segment's
directory entry before the ack, ``interval`` syncs both on a timer. Under every policy a
segment that rolls is synced in the background (as Kafka flushes a rolled segment) and
the recovery point moves past it. Topic metadata and checkpoints are always written
durably (``durable_io``).

Recovery reads indexes, not records: after a clean stop (``.clean-shutdown`` in the data
directory) every segment is taken from its index and the few batches after its last
entry; after a crash only the segments from the recovery point on (usually the active
one) are read through (``batch_scan``). Bytes that are not a valid batch there (a write
torn by a crash, a damaged sector) are copied to a quarantine file and reported
(``broker.recovery_quarantined``); the batches after them stay, and are served at their
offsets. A data directory written by an older broker (each batch framed with a length
and a CRC-32) is rewritten to this format at the first start, segment by segment.
"""

from __future__ import annotations

import bisect
import concurrent.futures
import json
import mmap
import os
import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from appliance.broker.settings import BrokerConfig, Flush
from appliance.broker.storage import cleaned_swap, framed_scan
from appliance.broker.storage.batch_scan import BadRegion, Batch, Scan, batch_at, scan
from appliance.broker.storage.durable_io import (
    TMP_SUFFIX,
    StorageError,
    fsync_dir,
    make_dir,
    make_dirs,
    replace_file,
)
from appliance.broker.storage.memory_log import StoredBatch
from appliance.broker.storage.offset_index import ENTRY, IndexEntry
from appliance.broker.storage.segment_file import SUFFIX, FileRange, Segment, segment_name
from appliance.logs import get_logger

log = get_logger("appliance.broker")
START_CHECKPOINT = "log-start-offset"
PRODUCER_STATE = "producer-state"
RECOVERY_POINT = "recovery-point"
FORMAT_MARKER = "format"  # "2": segments hold bare record batches (this module's format)
FORMAT = b"2"
BAD_SUFFIX = ".bad"
QUARANTINE = "quarantine"
CLEAN_SHUTDOWN = ".clean-shutdown"


@dataclass
class StorageStats:
    """What went wrong with the data directory since start (``broker_*`` metrics)."""

    quarantined_regions: int = 0  # byte ranges recovery found not to be valid batches
    quarantined_bytes: int = 0
    append_errors: dict[str, int] = field(default_factory=dict)  # errno name -> refused
    flush_errors: int = 0  # interval/roll/close fsyncs that failed (after the ack)

    def append_failed(self, exc: StorageError) -> None:
        self.append_errors[exc.errno_name] = self.append_errors.get(exc.errno_name, 0) + 1


@dataclass(frozen=True)
class SegmentSettings:
    """How a partition's segments roll (its topic's configs over the broker's)."""

    segment_bytes: int
    segment_ms: int
    index_interval_bytes: int
    segment_index_bytes: int


@dataclass(frozen=True)
class RecoveredLog:
    """What recovery found of one partition."""

    next_offset: int  # the high watermark
    first_offset: int  # base of the oldest batch kept (== next_offset if none)
    log_start: int  # checkpointed log start (DeleteRecords inside a batch), 0 if none
    producer_snapshot: bytes | None  # the last ``producer-state`` written, if readable
    batches_read: int  # batches recovery read through (not taken from an index)


class Flusher:
    """One background thread for the fsyncs nobody waits on (rolled segments), so a
    64 MiB fsync never holds the event loop; completions come back on the loop."""

    def __init__(self) -> None:
        self._pool = concurrent.futures.ThreadPoolExecutor(1, "broker-flush")
        self._loop = None

    def start(self, loop) -> None:
        self._loop = loop

    def submit(self, work: Callable[[], None], then: Callable[[], None]) -> None:
        future = self._pool.submit(work)
        loop = self._loop
        if loop is None:  # not serving yet (recovery): wait here
            future.result()
            then()
            return
        future.add_done_callback(lambda _f: loop.call_soon_threadsafe(then))

    def shutdown(self) -> None:
        self._pool.shutdown(wait=True)


def _quarantine(path: Path, data, regions: list[BadRegion], valid_after: Callable[[int], int],
                stats: StorageStats) -> list[BadRegion]:
    """Copy each bad region to its own file under ``quarantine/`` and report it; returns
    the regions copied.

    The segment itself is not rewritten: that would need as much free space as the
    segment, and recovery must work on a full disk. A bad region in the middle stays
    where it is (reads skip it; later starts find its copy already made); a torn tail,
    once copied, is cut off by the caller. Bytes that could not be copied are left in
    place: never destroyed.
    """
    qdir = path.parent / QUARANTINE
    copied_regions = []
    for region in regions:
        qpath = qdir / f"{path.name}.{region.start}-{region.end}"
        copied = qpath.exists() and qpath.stat().st_size == region.size
        fields = {}
        if not copied:
            try:
                make_dir(qdir)
                replace_file(qpath, bytes(data[region.start:region.end]))
                copied = True
            except OSError as exc:
                fields = {"quarantine_error": str(exc)}
        if copied:
            copied_regions.append(region)
        stats.quarantined_regions += 1
        stats.quarantined_bytes += region.size
        log.warning("broker.recovery_quarantined", segment=str(path),
                    at_byte=region.start, bytes=region.size,
                    quarantine_file=str(qpath) if copied else None,
                    valid_frames_after=valid_after(region.end),
                    at_end=region.end == len(data), **fields)
    return copied_regions


def _map(path: Path):
    """The file's bytes, mapped (b"" if empty): recovery reads through it without
    holding it in the heap."""
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            return b""
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)


class PartitionSegments:
    """The segment files of one partition; only the newest one is appended to."""

    def __init__(self, directory: Path, settings: SegmentSettings, flush: Flush,
                 stats: StorageStats, flusher: Flusher) -> None:
        self.dir = directory
        self.settings = settings
        self.flush = flush
        self.stats = stats
        self.flusher = flusher
        self.segments: list[Segment] = []
        self.bases: list[int] = []  # each segment's base offset (bisect index)
        self._dir_dirty = False  # a new segment's name not yet fsynced
        self.size = 0  # bytes of every segment

    # -- appending ----------------------------------------------------------------------

    def _should_roll(self, active: Segment, now_ms: int, incoming: int) -> bool:
        s = self.settings
        if not active.size:
            return False
        return (active.size + incoming > s.segment_bytes
                or (active.index.count + 1) * ENTRY.size > s.segment_index_bytes
                or now_ms - active.created_ms >= s.segment_ms)

    def roll(self, base: int, producer_state: bytes | None = None) -> Segment:
        """Start the segment at ``base``; the old active one is synced in the background
        and the recovery point (and producer snapshot) move to ``base`` once it is."""
        old = self.segments[-1] if self.segments else None
        if old is not None and not old.size and old.base == base:
            return old  # an empty active segment already starts here
        seg = Segment(self.dir, base)
        try:
            seg.open_for_append()
        except OSError as exc:
            seg.close()
            raise StorageError("create index", seg.index.path, exc) from exc
        self.segments.append(seg)
        self.bases.append(base)
        self._dir_dirty = self.flush is not Flush.WRITE
        if old is not None:
            self._flush_rolled(old, base, producer_state)
        return seg

    def _flush_rolled(self, old: Segment, base: int, producer_state: bytes | None) -> None:
        old.acquire()
        directory = self.dir

        def work() -> None:  # on the flusher's thread: touches only these files
            if not directory.exists():  # the topic was deleted meanwhile
                return
            try:
                if old.fd is not None:
                    os.fdatasync(old.fd)
                if old.index.fd is not None:
                    os.fsync(old.index.fd)
                if producer_state is not None:
                    replace_file(directory / PRODUCER_STATE, producer_state)
                replace_file(directory / RECOVERY_POINT, str(base).encode())
            except OSError as exc:
                self.stats.flush_errors += 1
                log.error("broker.flush_failed", directory=str(directory), error=str(exc))

        def then() -> None:  # back on the loop
            old.dirty = False
            old.close_index()
            old.release()

        self.flusher.submit(work, then)

    def append(self, batches: list[StoredBatch], now_ms: int,
               producer_state: Callable[[int], bytes]) -> None:
        """Write the batches to the active segment (rolling first if it is full), all or
        none; StorageError after an undone failure. Under ``Flush.FSYNC`` they (and a new
        segment's name) are on stable storage on return."""
        incoming = sum(len(b.data) for b in batches)
        first = batches[0].base_offset
        if not self.segments:
            self.roll(first)
        elif self._should_roll(self.segments[-1], now_ms, incoming):
            self.roll(first, producer_state(first))
        active = self.segments[-1]
        if not active.size and active.base != first:  # an empty segment at another base
            self._replace_empty(active, first)
            active = self.segments[-1]
        before = active.size
        active.append(batches, now_ms, self.settings.index_interval_bytes,
                      fsync=self.flush is Flush.FSYNC)
        if self._dir_dirty and self.flush is Flush.FSYNC:
            try:
                fsync_dir(self.dir)
                self._dir_dirty = False
            except OSError as exc:
                raise StorageError("fsync", self.dir, exc) from exc
        self.size += active.size - before

    def _replace_empty(self, empty: Segment, base: int) -> None:
        """The empty active segment's base is not where the log continues (recovery left
        it, or DeleteRecords moved past it): start the right one instead."""
        self.segments.pop()
        self.bases.pop()
        empty.delete()
        self.roll(base)

    # -- flushing -------------------------------------------------------------------------

    def sync(self) -> None:
        """Make everything written so far durable (raises OSError): the active segment and
        any rolled one the background flush has not reached yet."""
        for seg in self.segments:
            if seg.dirty or seg is self.segments[-1]:
                seg.sync()
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

    def close(self, producer_state: bytes | None = None) -> None:
        """A clean stop: everything synced, the producer state and recovery point written
        as of the end, every file closed."""
        self.sync_or_report()
        if self.segments:
            try:
                if producer_state is not None:
                    replace_file(self.dir / PRODUCER_STATE, producer_state)
                replace_file(self.dir / RECOVERY_POINT,
                             str(self.segments[-1].next_offset).encode())
            except OSError as exc:
                log.error("broker.flush_failed", directory=str(self.dir), error=str(exc))
        for seg in self.segments:
            seg.close()

    # -- reading --------------------------------------------------------------------------

    def next_offset(self) -> int:
        return self.segments[-1].next_offset if self.segments else 0

    def first_offset(self) -> int:
        return self.segments[0].base if self.segments else 0

    def read(self, offset: int, max_bytes: int, at_least_one: bool
             ) -> tuple[list[bytes | FileRange], int]:
        i = max(self._segment_index(offset), 0)
        while i < len(self.segments):
            parts, n = self.segments[i].read(offset, max_bytes, at_least_one)
            if parts:
                return parts, n
            i += 1  # nothing at or after the offset in this one: the next begins later
        return [], 0

    def bytes_below(self, offset: int, end: int) -> int:
        """The bytes from the batch holding ``offset`` up to the one starting at ``end``
        that one read (of one segment) may send; a read stops at its segment's end."""
        i = max(self._segment_index(offset), 0)
        j = self._segment_index(end)
        if i >= len(self.segments):
            return 0
        first = self.segments[i].locate(offset)
        if first is None:  # nothing here: the read goes on in the next segment
            return self.bytes_below(self.segments[i + 1].base, end) if (
                i + 1 < len(self.segments) and self.segments[i + 1].base < end) else 0
        if j > i:
            return self.segments[i].size - first.start
        stop = self.segments[i].locate(end)
        return (stop.start if stop is not None else self.segments[i].size) - first.start

    def _segment_index(self, offset: int) -> int:
        return bisect.bisect_right(self.bases, offset) - 1

    def batches_after(self, offset: int) -> Iterator[tuple[Segment, Batch]]:
        """Every batch holding an offset at or past ``offset``, with its segment (recovery
        replays producer state from a snapshot's offset on)."""
        i = max(self._segment_index(offset), 0)
        for seg in self.segments[i:]:
            first = seg.locate(offset) if seg.size else None
            if first is None:
                continue
            for b in seg.batches_from(first.start):
                yield seg, b

    def max_timestamp(self) -> int:
        return max((s.max_ts for s in self.segments if s.size), default=-1)

    def batches_from_timestamp(self, timestamp: int) -> Iterator[bytes]:
        """Batches that may hold the first record at or after ``timestamp``, in offset
        order, read one at a time (only those whose max timestamp reaches it)."""
        for seg in self.segments:
            if seg.max_ts < timestamp:
                continue
            for b in seg.batches_from(seg.timestamp_start(timestamp)):
                if b.header.max_timestamp >= timestamp:
                    yield seg.read_batch(b)

    # -- retention ----------------------------------------------------------------------

    def oldest_append_ms(self) -> int | None:
        for seg in self.segments:
            if seg.size:
                return seg.last_append_ms
        return None

    def _drop_first(self) -> int:
        """Delete the oldest segment (an active one is rolled first); its bytes."""
        seg = self.segments[0]
        if len(self.segments) == 1:
            if not seg.size:
                return 0
            self.roll(seg.next_offset)
        self.segments.pop(0)
        self.bases.pop(0)
        self.size -= seg.size
        seg.delete()
        return seg.size

    def expire(self, now_ms: int, retention_ms: int | None,
               retention_bytes: int | None) -> int:
        """Kafka's retention, a whole segment at a time: the oldest goes while its newest
        batch is older than ``retention_ms``, or while the partition would still hold
        ``retention_bytes`` without it. Returns the bytes deleted."""
        freed = 0
        while self.segments and self.segments[0].size:
            seg = self.segments[0]
            too_old = retention_ms is not None and seg.last_append_ms < now_ms - retention_ms
            too_big = retention_bytes is not None and self.size - seg.size >= retention_bytes
            if not (too_old or too_big):
                break
            freed += self._drop_first()
        return freed

    def oldest_end(self) -> int | None:
        """The offset after the oldest segment holding data (what evicting it frees)."""
        return self.segments[0].next_offset if self.segments and self.segments[0].size else (
            None)

    def evict_oldest(self, below: int | None = None) -> int:
        """The broker's disk budget: delete this partition's oldest segment, unless it
        reaches ``below`` (data consumer groups have not read)."""
        end = self.oldest_end()
        if end is None or (below is not None and end > below):
            return 0
        return self._drop_first()

    def delete_below(self, offset: int) -> None:
        """DeleteRecords/retention moved the log start: checkpoint it, delete the whole
        segments below it. The checkpoint, durable before any file goes, keeps a restart
        from serving records below the log start that are still inside kept files."""
        replace_file(self.dir / START_CHECKPOINT, str(offset).encode())
        while self.segments and self.segments[0].size and (
                self.segments[0].next_offset <= offset):
            self._drop_first()

    def checkpoint_log_start(self, offset: int) -> None:
        replace_file(self.dir / START_CHECKPOINT, str(offset).encode())

    # -- recovery -----------------------------------------------------------------------

    def _read_checkpoint(self, name: str) -> int | None:
        try:
            return int((self.dir / name).read_text())
        except (FileNotFoundError, ValueError):
            return None

    def recover(self, clean: bool, full: bool = False) -> RecoveredLog:
        """Open every segment: from its index when it can be trusted (a clean stop, or
        below the recovery point; never with ``full``), else by reading it through."""
        for leftover in self.dir.glob("*" + TMP_SUFFIX):  # a crash mid-replace_file
            leftover.unlink(missing_ok=True)
        cleaned_swap.recover_swaps(self.dir)  # a crash mid-compaction
        bases = sorted(int(p.name[:-len(SUFFIX)]) for p in self.dir.glob("*" + SUFFIX))
        recovery_point = self._read_checkpoint(RECOVERY_POINT) or 0
        expected: int | None = None
        read_through = 0
        for i, base in enumerate(bases):
            seg = Segment(self.dir, base)
            last = i == len(bases) - 1
            seg.open_for_append()
            # below the recovery point: the whole segment was synced (the next one starts
            # at or below it); the active one is never, after a crash
            trusted = not full and (clean or (not last and bases[i + 1] <= recovery_point))
            if not (trusted and self._from_index(seg, expected)):
                read_through += self._read_through(seg, expected)
            if not last:
                seg.close_index()
            self.segments.append(seg)
            self.bases.append(base)
            self.size += seg.size
            if seg.size:
                expected = seg.next_offset
        self._drop_trailing_empty()
        if not self.segments:
            self.roll(self._read_checkpoint(START_CHECKPOINT) or 0)
        try:
            snapshot = (self.dir / PRODUCER_STATE).read_bytes()
        except FileNotFoundError:
            snapshot = None
        first = next((s.base for s in self.segments if s.size), self.next_offset())
        return RecoveredLog(self.next_offset(), first,
                            self._read_checkpoint(START_CHECKPOINT) or 0, snapshot,
                            read_through)

    def _drop_trailing_empty(self) -> None:
        """Empty segments past the last batch that are not where the log continues: the
        names a power cut kept of segments whose data it lost (their offsets were never
        synced, so they are given again, as the flush policy says). Left, they would put
        the log's end past every batch, and a reader behind them would never move on."""
        while len(self.segments) >= 2 and not self.segments[-1].size:
            last, before = self.segments[-1], self.segments[-2]
            if before.size and before.next_offset == last.base:
                break  # the active segment of a log that rolled: where it continues
            self.segments.pop()
            self.bases.pop()
            log.warning("broker.recovery_dropped_empty_segment", segment=str(last.path),
                        log_end=before.next_offset if before.size else before.base)
            last.delete()

    def _bad_file(self, seg: Segment) -> Path:
        return self.dir / segment_name(seg.base, BAD_SUFFIX)

    def _load_bad(self, seg: Segment) -> None:
        try:
            seg.bad = tuple(BadRegion(a, b) for a, b in json.loads(
                self._bad_file(seg).read_text()))
        except (FileNotFoundError, ValueError, TypeError):
            seg.bad = ()

    def _from_index(self, seg: Segment, expected: int | None) -> bool:
        """Take the segment from its index: check the last entry against the log, read
        the batches after it (at most an index interval and a batch). False if anything
        does not hold: the caller reads the segment through instead."""
        assert seg.fd is not None
        file_size = os.fstat(seg.fd).st_size
        if file_size == 0:
            seg.set_recovered(0, seg.base, -1, 0, self._mtime_ms(seg))
            return True
        entries = seg.index.entries()
        if not entries or entries[0].position != 0:
            return False
        last = entries[-1]
        if last.position >= file_size or (expected is not None and entries[0].offset
                                          < expected):
            return False
        self._load_bad(seg)
        data = _map(seg.path)
        try:
            tail = scan(data, last.position, last.offset)
            known = set(seg.bad)  # regions an earlier recovery left in place: skipped
            if any(r not in known for r in tail.bad) or not tail.batches or (
                    tail.batches[0].base_offset != last.offset):
                return False
            if tail.end != file_size:
                return False
            max_ts = max([last.max_ts_before] + [b.header.max_timestamp
                                                 for b in tail.batches])
            seg.set_recovered(tail.end, tail.batches[-1].next_offset, max_ts,
                              tail.end - last.position, self._mtime_ms(seg))
            seg.index.truncate_to(len(entries))
            return True
        finally:
            if isinstance(data, mmap.mmap):
                data.close()

    @staticmethod
    def _mtime_ms(seg: Segment) -> int:
        return seg.path.stat().st_mtime_ns // 1_000_000

    def _read_through(self, seg: Segment, expected: int | None) -> int:
        """Read the whole segment: keep every valid batch, quarantine bad bytes (cut a torn
        tail once copied; other bad regions stay, and reads skip them), rebuild the index.
        Returns the batches read."""
        assert seg.fd is not None
        mtime_ns = seg.path.stat().st_mtime_ns
        data = _map(seg.path)
        try:
            length = len(data)
            found = scan(data, 0, expected)
            copied = _quarantine(seg.path, data, found.bad,
                                 lambda end: sum(1 for b in found.batches if b.start >= end),
                                 self.stats) if found.bad else []
        finally:
            if isinstance(data, mmap.mmap):
                data.close()
        bad = list(found.bad)
        if bad and bad[-1].end == length and bad[-1] in copied:
            os.ftruncate(seg.fd, bad[-1].start)
            os.fsync(seg.fd)
            os.utime(seg.path, ns=(mtime_ns, mtime_ns))  # what time retention reads
            length = bad.pop().start
        seg.bad = tuple(bad)
        if bad:
            replace_file(self._bad_file(seg), json.dumps([list(r) for r in bad]).encode())
        else:
            self._bad_file(seg).unlink(missing_ok=True)
        entries, max_ts, since = self._index_for(found)
        seg.index.rewrite(entries)
        next_offset = found.batches[-1].next_offset if found.batches else seg.base
        seg.set_recovered(length, next_offset, max_ts, since, mtime_ns // 1_000_000)
        return len(found.batches)

    def _index_for(self, found: Scan) -> tuple[list[IndexEntry], int, int]:
        entries: list[IndexEntry] = []
        max_ts, since = -1, 0
        interval = self.settings.index_interval_bytes
        for b in found.batches:
            if not entries or since >= interval:
                entries.append(IndexEntry(b.base_offset, b.start, max_ts))
                since = 0
            since += b.header.size
            max_ts = max(max_ts, b.header.max_timestamp)
        return entries, max_ts, since


def upgrade_framed(directory: Path, stats: StorageStats) -> int:
    """Rewrite a partition written by an older broker (each batch framed as ``[u32 length]
    [u32 crc32][batch]``) to bare batches, one segment at a time, atomically; then mark the
    directory. Idempotent: a crash half-way leaves each file in one format or the other,
    and a segment already rewritten is recognised by its first batch. Bad bytes are
    quarantined as recovery always did. Returns the segments rewritten."""
    rewritten = 0
    for path in sorted(directory.glob("*" + SUFFIX)):
        data = _map(path)
        try:
            if not len(data) or _bare_batches_at_start(data):
                continue
            found = framed_scan.scan(data, None)
            if found.bad:
                regions = [BadRegion(r.start, r.end) for r in found.bad]
                frames = found.frames

                def valid_after(end: int, frames=frames) -> int:
                    return sum(1 for f in frames if f.start >= end)

                _quarantine(path, data, regions, valid_after, stats)
            mtime_ns = path.stat().st_mtime_ns
            replace_file(path, b"".join(f.batch for f in found.frames))
            os.utime(path, ns=(mtime_ns, mtime_ns))
            rewritten += 1
        finally:
            if isinstance(data, mmap.mmap):
                data.close()
    replace_file(directory / FORMAT_MARKER, FORMAT)
    if rewritten:
        log.info("broker.segments_upgraded", directory=str(directory), segments=rewritten)
    return rewritten


def _bare_batches_at_start(data) -> bool:
    return batch_at(data, 0, None) is not None


class Storage:
    """All durable state of the broker under one data directory."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.root = Path(config.data_dir or ".") / "topics"
        make_dirs(self.root)
        self.stats = StorageStats()
        self.flusher = Flusher()
        self._partitions: list[PartitionSegments] = []
        self._timer = None
        marker = self.root.parent / CLEAN_SHUTDOWN
        self.clean_start = marker.exists()
        self._marker = marker

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
                        settings: SegmentSettings) -> list[PartitionSegments]:
        """New partitions' directories, created if missing (one fsync for all)."""
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
            # Not synced: a marker lost to a power cut is written again at the next start
            # (upgrade_framed finds these segments already bare).
            (pdir / FORMAT_MARKER).write_bytes(FORMAT)
            segs = PartitionSegments(pdir, settings, self.config.flush, self.stats,
                                     self.flusher)
            self._partitions.append(segs)
            out.append(segs)
        if created:
            fsync_dir(d)
        return out

    def recover_partition(self, topic: str, index: int, settings: SegmentSettings
                          ) -> tuple[PartitionSegments, RecoveredLog]:
        pdir = self.root / topic / str(index)
        make_dir(pdir)
        try:
            marked = (pdir / FORMAT_MARKER).read_bytes().strip() == FORMAT
        except FileNotFoundError:
            marked = False
        if not marked:  # an older broker's, or a marker a power cut emptied: check each
            upgrade_framed(pdir, self.stats)
        segs = PartitionSegments(pdir, settings, self.config.flush, self.stats, self.flusher)
        recovered = segs.recover(self.clean_start, self.config.full_recovery)
        self._partitions.append(segs)
        return segs, recovered

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
                for seg in segs.segments:
                    seg.close()
        self._partitions = [p for p in self._partitions if not p.dir.is_relative_to(d)]
        gone = self.root.parent / f"deleted-{name}-{uuid.uuid4().hex[:8]}"
        os.replace(d, gone)  # atomic: a crash never leaves a half-deleted topic behind
        fsync_dir(self.root)  # durable before the answer: a power cut must not revive it
        fsync_dir(self.root.parent)
        shutil.rmtree(gone, ignore_errors=True)

    def topic_metas(self) -> Iterator[dict]:
        """Every topic's ``topic.json``; topics deleted mid-way by a crash are cleaned up."""
        for leftover in self.root.parent.glob("deleted-*"):
            shutil.rmtree(leftover, ignore_errors=True)
        for meta_path in sorted(self.root.glob("*/topic.json")):
            yield json.loads(meta_path.read_text())

    def recovered(self) -> None:
        """Recovery is over: from now on a crash is unclean until the next clean stop."""
        if self.clean_start:
            self._marker.unlink(missing_ok=True)
            fsync_dir(self._marker.parent)

    # -- size ---------------------------------------------------------------------------

    def log_bytes(self) -> int:
        return sum(p.size for p in self._partitions)

    # -- flushing -------------------------------------------------------------------------

    def start(self, loop) -> None:
        self.flusher.start(loop)
        if self.config.flush is Flush.INTERVAL:
            self._timer = loop.call_later(self.config.flush_interval_ms / 1000.0,
                                          self._interval_flush, loop)

    def _interval_flush(self, loop) -> None:
        for segs in self._partitions:
            segs.sync_or_report()
        self._timer = loop.call_later(self.config.flush_interval_ms / 1000.0,
                                      self._interval_flush, loop)

    def close(self, producer_states: Callable[[PartitionSegments], bytes | None]) -> None:
        """A clean stop: every partition synced and closed, then the marker that lets the
        next start trust the indexes."""
        if self._timer is not None:
            self._timer.cancel()
        self.flusher.shutdown()
        ok = True
        for segs in self._partitions:
            before = self.stats.flush_errors
            segs.close(producer_states(segs))
            ok = ok and self.stats.flush_errors == before
        if ok:
            try:
                replace_file(self._marker, str(int(time.time())).encode())
            except OSError as exc:
                log.error("broker.flush_failed", directory=str(self.root.parent),
                          error=str(exc))

