"""The broker-wide cap on what the log may hold: every partition together.

Per-topic retention (``retention.ms``, ``retention.bytes``) is Kafka's and per partition;
it cannot bound a broker whose topics and partitions clients create. This budget does:
with ``--data-dir`` it is sized to the disk (the bytes the segments may take), in memory
to the host's RAM (the batches and their bookkeeping). Past it, the oldest data of the
partition whose oldest data is oldest goes first, as time retention would have taken it
(the registry picks; ``PartitionLog.evict`` deletes): readers behind the new log start get
OFFSET_OUT_OF_RANGE, exactly as after retention.

What it may take is the policy's (``--retention-total-policy``). By default only data that
every consumer group with a committed offset on its partition has read (a partition no
group commits on has no such data): when the rest is all unread, produce is refused with
Kafka's retriable KAFKA_STORAGE_ERROR, as Kafka refuses writes on a full disk, and the
producers back off until groups read on or retention frees space. ``keep-newest`` evicts
the oldest data whether read or not (read data first). Every eviction is counted here by
its reason, and logged at WARN by the registry.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field

GIB = 1 << 30
DISK_SHARE = 0.8  # of the space the log may use (free space and its own bytes) at start
MEMORY_SHARE = 8  # memory: a 1/8 of RAM, ...
MEMORY_CAP = GIB  # ... at most 1 GiB


class EvictReason:
    """``broker_log_evicted_bytes_total{reason}``."""

    READ = "read"  # every group with a committed offset on the partition had read it
    UNREAD = "unread"  # keep-newest: taken though no group (or not every one) had read it


EVICT_REASONS = (EvictReason.READ, EvictReason.UNREAD)


@dataclass
class LogBudget:
    limit: int  # bytes
    source: str  # how the limit was chosen (for the start-up log line and docs)
    used: int = 0
    evicted: dict[str, int] = field(default_factory=lambda: dict.fromkeys(EVICT_REASONS, 0))
    refused_produces: int = 0  # partitions' produces refused: nothing left it may evict

    @property
    def over(self) -> int:
        """Bytes over the limit (0: within it)."""
        return max(self.used - self.limit, 0)

    def add(self, n: int) -> None:
        self.used += n

    def sub(self, n: int) -> None:
        self.used = max(self.used - n, 0)


def disk_default(data_dir: str, log_bytes: int) -> int:
    """``DISK_SHARE`` of what the log may use on the data directory's file system: the
    free space plus what it already holds."""
    free = shutil.disk_usage(data_dir).free
    return int(DISK_SHARE * (free + log_bytes))


def memory_default() -> int:
    """A ``MEMORY_SHARE``-th of the host's RAM, at most ``MEMORY_CAP``."""
    try:
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        ram = 8 * GIB
    return min(ram // MEMORY_SHARE, MEMORY_CAP)
