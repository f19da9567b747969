"""What a rules reload request came to: the record the running appliance keeps and
``appliance rules reload`` reads back (``/-/rules`` on the metrics endpoint).

Each outcome carries the wall-clock time its reload started: a client that sent its request
at time T waits for an outcome started after T, not for whatever reload was already under
way (which read the file before the client's change). Each result carries its exit code for
the CLI.
"""

from __future__ import annotations

import enum
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any

#: The status page's path on the metrics endpoint.
STATUS_PATH = "/-/rules"


class ReloadResult(enum.Enum):
    APPLIED = "applied"      # the new rules run (from the epoch or batch it names)
    UNCHANGED = "unchanged"  # the file's content is the running version: nothing to swap
    REJECTED = "rejected"    # the file failed validation: the running rules stay
    FAILED = "failed"        # the swap itself failed (the running rules stay, if they can)

    @property
    def exit_code(self) -> int:
        """``appliance rules reload``: 0 applied, 2 rejected (bad rules), 1 failure."""
        return {ReloadResult.REJECTED: 2, ReloadResult.FAILED: 1}.get(self, 0)


@dataclass(frozen=True)
class ReloadOutcome:
    seq: int
    result: ReloadResult
    source: str
    version: str           # the version running afterwards
    previous_version: str
    error: str | None = None       # REJECTED / FAILED: the first problem, one line
    problems: tuple[str, ...] = ()  # REJECTED: every problem, one line each
    swap_s: float | None = None     # APPLIED: how long alerting waited (0 but in real-time)
    effective_from: int | None = None  # APPLIED: the first epoch or batch the rules run
    in_effect: bool | None = None      # APPLIED: a task ran them before the answer
    seconds: float = 0.0            # the whole request, validation and compilation included
    started_at: float = 0.0         # unix time the reload started (read the file)
    finished_at: float = field(default_factory=time.time)

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["result"] = self.result.value
        out["problems"] = list(self.problems)
        return out


class ReloadLog:
    """The last outcome and how many there were; written by the runner, read by the HTTP
    status page's thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seq = 0
        self._last: ReloadOutcome | None = None

    def next_seq(self) -> int:
        with self._lock:
            return self._seq + 1

    def record(self, outcome: ReloadOutcome) -> None:
        with self._lock:
            self._seq = outcome.seq
            self._last = outcome

    def snapshot(self) -> tuple[int, ReloadOutcome | None]:
        with self._lock:
            return self._seq, self._last
