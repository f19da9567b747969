"""``[cpus] after_ready`` in the lifecycle: checked before anything starts, kept from
``ready`` on, released at the stop.

The pinning itself (which threads, the timer that gives every CPU back) is
``appliance.process.cpu_affinity``; this module is when the runner asks for it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable

from appliance.config import CpusConfig
from appliance.process.cpu_affinity import ReadyCpus, allowed_problem
from appliance.process.preflight import PreflightError


class KeptCpus:
    """The CPUs ``[cpus] after_ready`` keeps the appliance's processes to (off when none)."""

    def __init__(self, cpus: CpusConfig) -> None:
        self.cpus = cpus
        self._ready: ReadyCpus | None = None

    def check(self, allowed: Iterable[int] | None = None) -> None:
        """They must leave this process some CPU it may use to others (else exit 2);
        ``allowed``: the process's CPUs (default: its affinity now)."""
        kept = self.cpus.kept
        if not kept:
            return
        allowed = os.sched_getaffinity(0) if allowed is None else allowed
        problem = allowed_problem(kept, frozenset(allowed))
        if problem is not None:
            raise PreflightError(f"cpus.after_ready: {problem}")

    def keep(self, excluded: Callable[[], Iterable[int]]) -> None:
        """From ``ready`` on, for ``after_ready_for``; ``excluded()``: the pids whose trees
        stay as they are (the embedded broker). Once."""
        if self.cpus.kept and self._ready is None:
            self._ready = ReadyCpus(self.cpus.kept, self.cpus.kept_s, excluded=excluded)
            self._ready.start()

    def release(self) -> None:
        ready, self._ready = self._ready, None
        if ready is not None:
            ready.release()
