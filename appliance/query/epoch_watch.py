"""Fail a continuous query that has stopped committing epochs.

Why: Spark's continuous engine writes its offset and commit logs from the epoch
coordinator, an RPC endpoint on the driver. When one of those writes fails (a full
checkpoint disk: tests/faults/test_disk_full.py), Spark logs "Inbox: Ignoring error" and
the query stays active. Its tasks keep writing alerts, no epoch commits again, the
appliance never exits for its supervisor, and a restart replays everything since the
failure. Micro-batch and real-time fail their query on the same error, so only continuous
needs this.

An epoch commits every interval whether events came or not, so a commit log that stays
silent for many intervals means the query is stuck. The timeout is long against a
saturated machine's epochs (a few seconds late at worst, measured) and short against the
hour the epoch backlog queue would take to fail the query by itself; its policy (default,
``[query] stall_timeout``, bounds) is ``QueryConfig.stall_timeout_s``.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from appliance.query.checkpoint import batch_ids
from appliance.trigger import TriggerMode


def latest_commit(checkpoint_dir: Path) -> int | None:
    """The highest epoch (or batch) in the checkpoint's commit log, None if it has none."""
    return max(batch_ids(checkpoint_dir / "commits"), default=None)


@dataclass
class EpochWatch:
    """Tracks the commit log; ``stalled()`` says why once nothing committed for too long."""

    checkpoint_dir: Path
    timeout_s: float
    clock: Callable[[], float] = time.monotonic
    _latest: int | None = field(default=None, init=False)
    _since: float = field(default=0.0, init=False)

    def __post_init__(self) -> None:
        self._latest = latest_commit(self.checkpoint_dir)
        self._since = self.clock()

    def stalled(self) -> str | None:
        """None while epochs commit; else the cause to report, with the checkpoint
        filesystem's free space (the usual reason)."""
        now = self.clock()
        latest = latest_commit(self.checkpoint_dir)
        if latest != self._latest:
            self._latest, self._since = latest, now
            return None
        silent = now - self._since
        if silent < self.timeout_s:
            return None
        try:
            free = f"{shutil.disk_usage(self.checkpoint_dir).free:,} bytes free"
        except OSError as exc:
            free = f"unreadable ({exc.strerror})"
        return (f"no epoch committed for {silent:.0f} s while the query runs (last committed "
                f"epoch {self._latest}): Spark's epoch coordinator is stuck, usually because "
                f"it cannot write the checkpoint at {self.checkpoint_dir} (its filesystem: "
                f"{free}); Spark logs its error as 'Inbox: Ignoring error'")


def watch_for(mode: TriggerMode, checkpoint_dir: str, stall_timeout_s: float) -> EpochWatch | None:
    """A watch over a query of ``mode`` if its epochs commit every interval (continuous);
    None for the triggers whose query fails by itself."""
    if not mode.commits_every_interval:
        return None
    return EpochWatch(Path(checkpoint_dir), stall_timeout_s)
