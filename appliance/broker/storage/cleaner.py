"""One log-compaction pass over a partition's closed segments, Kafka's way, in bounded
memory; it runs on a worker thread and only writes new files (the swap is
``PartitionSegments.swap_cleaned``'s, on the event loop).

1. The **dirty** segments are the closed ones from the clean point (the
   ``cleaner-offset-checkpoint``) on, older than ``min.compaction.lag.ms``. Their keys go
   into a map of key digest -> newest offset, capped like Kafka's dedupe buffer
   (``--log-cleaner-dedupe-buffer-size``): the pass covers the dirty segments whose keys
   all fit, the next pass the rest.
2. Every closed segment up to the last one mapped is copied to ``<base>.cleaned`` a batch
   at a time, keeping a record unless the map holds a newer offset for its key;
   tombstones (null values) go too once their segment is older than
   ``delete.retention.ms``. Records without a key stay. Batches keep their offsets (see
   ``compact_batch``); a batch left empty is dropped; a segment where nothing changed is
   not rewritten. A transaction's batches and markers are copied whole, except the
   batches of an aborted transaction, which go, as Kafka's cleaner removes them: no
   ``read_committed`` consumer would return them, and a ``read_uncommitted`` one of a
   compacted topic is owed only each key's newest committed value. Markers stay.

Memory: the map, one batch and its decompressed records.
"""

from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from appliance.broker.storage import compact_batch
from appliance.broker.storage.batch_scan import headers
from appliance.broker.storage.compact_batch import CompactionError
from appliance.broker.storage.offset_index import IndexEntry
from appliance.broker.wire.compression import CompressionError
from appliance.broker.wire.records import read_header

CLEANED_SUFFIX = ".cleaned"
# What one map entry costs in this process: a 16-byte digest as a bytes object (49 B),
# an int (32 B) and the dict's slot and spare room (~40 B). Kafka's costs 24 B.
ENTRY_BYTES = 121


def key_digest(key: bytes) -> bytes:
    return hashlib.blake2b(key, digest_size=16).digest()


@dataclass(frozen=True)
class SegmentFile:
    """A closed segment as the loop saw it when the pass was planned."""

    base: int
    path: Path
    size: int
    next_offset: int
    last_append_ms: int


class AbortedRange(NamedTuple):
    """An aborted transaction of the partition: its producer's batches from
    ``first_offset`` up to its abort marker at ``marker_offset``."""

    producer_id: int
    first_offset: int
    marker_offset: int


@dataclass(frozen=True)
class CleanJob:
    directory: Path
    segments: tuple[SegmentFile, ...]  # closed segments, oldest first
    clean_point: int  # offsets below it were cleaned by an earlier pass
    now_ms: int
    min_lag_ms: int
    delete_retention_ms: int
    map_bytes: int  # the dedupe buffer
    max_batch_bytes: int  # decompression limit
    index_interval_bytes: int = 4096  # the topic's index.interval.bytes
    aborted: tuple[AbortedRange, ...] = ()  # the partition's, when the pass was planned


@dataclass(frozen=True)
class CleanedFile:
    """A segment's cleaned copy and what its Segment needs to know of it (worked out
    here, off the event loop, so the swap only renames and opens)."""

    path: Path
    size: int  # 0: every batch of the segment went
    next_offset: int
    max_ts: int
    since_index: int  # log bytes after the last index entry
    entries: tuple[IndexEntry, ...]


@dataclass
class CleanResult:
    end_offset: int  # the new clean point (the pass covered everything below it)
    cleaned: dict[int, CleanedFile] = field(default_factory=dict)  # by segment base
    bytes_read: int = 0
    bytes_written: int = 0
    keys: int = 0
    records_removed: int = 0
    map_full: bool = False
    seconds: float = 0.0


class KeyMap:
    """Key digest -> newest offset, at most ``capacity`` keys."""

    def __init__(self, map_bytes: int) -> None:
        self.capacity = max(map_bytes // ENTRY_BYTES, 1)
        self.offsets: dict[bytes, int] = {}

    def full_for(self, new_keys: int) -> bool:
        return len(self.offsets) + new_keys > self.capacity

    def put(self, digest: bytes, offset: int) -> None:
        self.offsets[digest] = offset

    def newest(self, digest: bytes) -> int | None:
        return self.offsets.get(digest)


def headers_of(path: Path):
    """The batches of a segment file (for tools and tests that plan a pass)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        yield from headers(fd, 0, os.fstat(fd).st_size, ())
    finally:
        os.close(fd)


def _batches(seg: SegmentFile):
    """(base offset, batch bytes) of every batch in the file, one at a time."""
    fd = os.open(seg.path, os.O_RDONLY)
    try:
        for b in headers(fd, 0, seg.size, ()):
            yield b.base_offset, os.pread(fd, b.header.size, b.start)
    finally:
        os.close(fd)


def _map_segment(seg: SegmentFile, keys: KeyMap, limit: int) -> bool:
    """Add the segment's keys; False (the map left as it was) if they do not all fit."""
    staged: dict[bytes, int] = {}
    for base, batch in _batches(seg):
        if _transactional(batch):
            continue
        try:
            _, recs = compact_batch.batch_records(batch, limit)
        except (CompactionError, CompressionError):
            continue  # kept whole when cleaned; its keys supersede nothing
        for r in recs:
            if r.key is not None:
                staged[key_digest(r.key)] = base + r.offset_delta
        if keys.full_for(len(staged)):
            return False
    for digest, offset in staged.items():
        keys.put(digest, offset)
    return True


def plan_dirty(job: CleanJob) -> list[SegmentFile]:
    """The dirty segments old enough to clean (``min.compaction.lag.ms``), in order."""
    out = []
    for seg in job.segments:
        if seg.next_offset <= job.clean_point:
            continue
        if seg.last_append_ms > job.now_ms - job.min_lag_ms:
            break
        out.append(seg)
    return out


def clean(job: CleanJob) -> CleanResult | None:
    """One pass; None when there is nothing to clean (no dirty segment old enough, or
    not even one segment's keys fit the map)."""
    started = time.monotonic()
    dirty = plan_dirty(job)
    keys = KeyMap(job.map_bytes)
    mapped_end = None
    for seg in dirty:
        if not _map_segment(seg, keys, job.max_batch_bytes):
            break
        mapped_end = seg.next_offset
    if mapped_end is None:
        return None
    result = CleanResult(end_offset=mapped_end, keys=len(keys.offsets),
                         map_full=mapped_end != dirty[-1].next_offset)
    tombstones_before = job.now_ms - job.delete_retention_ms
    for seg in job.segments:
        if seg.base >= mapped_end:
            break
        _clean_segment(job, seg, keys, seg.last_append_ms < tombstones_before, result)
    result.seconds = time.monotonic() - started
    return result


def _clean_segment(job: CleanJob, seg: SegmentFile, keys: KeyMap, drop_tombstones: bool,
                   result: CleanResult) -> None:
    out_path = job.directory / (seg.path.stem + CLEANED_SUFFIX)
    changed = False
    written = 0
    entries: list[IndexEntry] = []
    max_ts, since, next_offset = -1, 0, seg.base
    with open(out_path, "wb") as out:
        for base, batch in _batches(seg):
            result.bytes_read += len(batch)
            aborted = _aborted_records(batch, base, job.aborted)
            if aborted:
                changed = True
                result.records_removed += aborted
                continue
            try:
                if _transactional(batch):
                    raise CompactionError("kept whole")
                section, recs = compact_batch.batch_records(batch, job.max_batch_bytes)
            except (CompactionError, CompressionError):
                section, recs = None, []
            kept = recs if section is None else [
                r for r in recs if _keep(r, base, keys, drop_tombstones)]
            if section is not None and len(kept) != len(recs):
                changed = True
                result.records_removed += len(recs) - len(kept)
                if not kept:
                    continue
                batch = compact_batch.rebuilt(batch, section, kept)
            if not entries or since >= job.index_interval_bytes:
                entries.append(IndexEntry(base, written, max_ts))
                since = 0
            header = read_header(batch)
            out.write(batch)
            written += len(batch)
            since += len(batch)
            max_ts = max(max_ts, header.max_timestamp)
            next_offset = base + header.last_offset_delta + 1
        out.flush()
        os.fsync(out.fileno())
    if not changed:
        out_path.unlink(missing_ok=True)
        return
    result.bytes_written += written
    os.utime(out_path, ns=(seg.last_append_ms * 1_000_000,) * 2)
    result.cleaned[seg.base] = CleanedFile(out_path, written, next_offset, max_ts, since,
                                           tuple(entries))


def _transactional(batch: bytes) -> bool:
    """Markers and transactional batches are kept whole and supersede nothing: which of
    them were aborted is the partition's transaction state, not the cleaner's."""
    h = read_header(batch)
    return h.is_control or h.is_transactional


def _aborted_records(batch: bytes, base: int, aborted: tuple[AbortedRange, ...]) -> int:
    """How many records ``batch`` holds if it belongs to an aborted transaction, else 0."""
    h = read_header(batch)
    if not h.is_transactional or h.is_control:
        return 0
    for a in aborted:
        if a.producer_id == h.producer_id and a.first_offset <= base < a.marker_offset:
            return h.record_count
    return 0


def _keep(r: compact_batch.Record, base: int, keys: KeyMap, drop_tombstones: bool) -> bool:
    if r.key is None:
        return True
    newest = keys.newest(key_digest(r.key))
    if newest is not None and newest > base + r.offset_delta:
        return False  # a newer record of the key follows
    return not (r.tombstone and drop_tombstones)
