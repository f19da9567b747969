"""When and where log compaction runs: one pass at a time, on its own thread.

Every retention sweep (``--retention-check-ms``) the cleaner looks at the partitions of
compacted topics (``cleanup.policy`` with ``compact``) stored on disk and starts a pass
(``cleaner.clean``) on the one whose closed segments are dirtiest, if that share reaches
its ``min.cleanable.dirty.ratio`` or its oldest dirty segment is older than
``max.compaction.lag.ms``, and its dirty segments are older than
``min.compaction.lag.ms``. The pass reads and writes files only; its result is put in
place on the event loop (``cleaned_swap``). What every pass did is logged
(``broker.log_cleaned``: bytes read and written, MB/s, keys, records removed) and kept
for the metrics.
"""

from __future__ import annotations

import concurrent.futures
import time
from dataclasses import dataclass

from appliance.broker.storage import cleaned_swap, cleaner
from appliance.broker.storage.cleaner import CleanJob, CleanResult, SegmentFile
from appliance.broker.storage.partition import PartitionLog
from appliance.broker.storage.topic_registry import Compaction, TopicRegistry
from appliance.logs import get_logger

log = get_logger("appliance.broker")


@dataclass
class CleanerStats:
    passes: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    records_removed: int = 0
    seconds: float = 0.0
    failures: int = 0


class LogCleaner:
    def __init__(self, registry: TopicRegistry) -> None:
        self.registry = registry
        self.stats = CleanerStats()
        self._pool = concurrent.futures.ThreadPoolExecutor(1, "broker-cleaner")
        self._running: concurrent.futures.Future | None = None
        self._stopping = False

    def tick(self, loop) -> None:
        """Start a pass if one is due and none is running."""
        if self._running is not None or self._stopping:
            return
        picked = self._pick(int(time.time() * 1000))
        if picked is None:
            return
        part, job = picked
        future = self._pool.submit(cleaner.clean, job)
        self._running = future
        future.add_done_callback(
            lambda f: loop.call_soon_threadsafe(self._finished, part, job, f))

    def _pick(self, now_ms: int) -> tuple[PartitionLog, CleanJob] | None:
        best: tuple[float, PartitionLog, CleanJob] | None = None
        for topic in list(self.registry.topics.values()):
            limits = self.registry.limits(topic)
            if limits.compaction is None:
                continue
            for part in topic.partitions:
                job = self._job(part, limits.compaction, now_ms)
                if job is None:
                    continue
                ratio = _due(job, limits.compaction)
                if ratio is not None and (best is None or ratio > best[0]):
                    best = (ratio, part, job)
        return None if best is None else (best[1], best[2])

    def _job(self, part: PartitionLog, c: Compaction, now_ms: int) -> CleanJob | None:
        segs = part.segments
        if segs is None or len(segs.segments) < 2:
            return None
        closed = tuple(SegmentFile(s.base, s.path, s.size, s.next_offset, s.last_append_ms)
                       for s in segs.segments[:-1] if s.size and not s.bad)
        if not closed:
            return None
        config = self.registry.config
        return CleanJob(segs.dir, closed, cleaned_swap.read_clean_point(segs.dir), now_ms,
                        c.min_lag_ms, c.delete_retention_ms,
                        config.log_cleaner_dedupe_buffer_bytes, config.max_decompressed_bytes,
                        segs.settings.index_interval_bytes,
                        tuple(cleaner.AbortedRange(*a) for a in part.txns.aborted))

    def _finished(self, part: PartitionLog, job: CleanJob,
                  future: concurrent.futures.Future) -> None:
        self._running = None
        try:
            result: CleanResult | None = future.result()
        except Exception as exc:  # an I/O error, a file gone: this pass only
            self.stats.failures += 1
            log.warning("broker.log_clean_failed", topic=part.topic, partition=part.index,
                        error=repr(exc))
            return
        if result is None:
            return
        segs = part.segments
        if self._stopping or segs is None:
            cleaned_swap.discard(result)
            return
        try:
            freed = cleaned_swap.swap_in(segs, result)
        except OSError as exc:  # what was swapped is consistent; recovery finishes it
            self.stats.failures += 1
            log.error("broker.log_clean_swap_failed", topic=part.topic,
                      partition=part.index, error=str(exc))
            return
        if freed is None:
            log.info("broker.log_clean_discarded", topic=part.topic, partition=part.index)
            return
        part.compacted(freed)
        s = self.stats
        s.passes += 1
        s.bytes_read += result.bytes_read
        s.bytes_written += result.bytes_written
        s.records_removed += result.records_removed
        s.seconds += result.seconds
        log.info("broker.log_cleaned", topic=part.topic, partition=part.index,
                 clean_point=result.end_offset, bytes_read=result.bytes_read,
                 bytes_written=result.bytes_written, freed_bytes=freed, keys=result.keys,
                 records_removed=result.records_removed, map_full=result.map_full,
                 seconds=round(result.seconds, 3),
                 mb_per_s=round(result.bytes_read / 1e6 / max(result.seconds, 1e-6), 2))

    def shutdown(self) -> None:
        """Stop: a pass still running finishes its files, which are discarded."""
        self._stopping = True
        self._pool.shutdown(wait=True)
        running = self._running
        if running is not None and running.done() and not running.exception():
            result = running.result()
            if result is not None:
                cleaned_swap.discard(result)


def _due(job: CleanJob, c: Compaction) -> float | None:
    """The dirty share of the job's segments when a pass is due, else None."""
    dirty = cleaner.plan_dirty(job)
    if not dirty:
        return None
    total = sum(s.size for s in job.segments)
    dirty_bytes = sum(s.size for s in job.segments if s.next_offset > job.clean_point)
    ratio = dirty_bytes / total if total else 0.0
    overdue = dirty[0].last_append_ms < job.now_ms - c.max_lag_ms
    return ratio if ratio >= c.min_dirty_ratio or overdue else None
