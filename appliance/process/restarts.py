"""Which query failures the appliance restarts in its own session, and how often.

Why: continuous mode never retries a task, so one executor JVM lost on a cluster (a kill,
the OOM killer, a worker host gone) ends the whole query. Exiting 1 for the supervisor
then costs a new driver JVM, a new session, executors granted again and the warm-up:
the lost partition's events waited 37 s for their alerts (``bench.cluster_latency``).
Yet nothing the driver holds is damaged by such a loss: its session, its JIT-warmed
plan and the checkpoint are intact, and the cluster manager grants a replacement
executor by itself. So for causes that lie outside the driver the query is started again
in the same session, from the same checkpoint (at-least-once as after any restart).

The causes are a table, each with its reason, matched against Spark's failure message;
anything else (a checkpoint that cannot be written, a broker gone, a failing rule) still
exits 1, because a new query in the same process would meet it again. A budget bounds the
restarts: more than ``limit`` within ``window_s`` means more is wrong than one lost JVM,
and a fresh process under the supervisor is the better next step.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from appliance import logs

#: Seconds over which ``[query] executor_loss_restarts`` restarts are counted.
WINDOW_S = 600.0

log = logs.get_logger("appliance")


@dataclass(frozen=True)
class InPlaceCause:
    """A failure the query survives by starting again in the same session."""

    marker: str  # text Spark puts in the query's failure message for this cause
    reason: str


IN_PLACE_CAUSES: tuple[InPlaceCause, ...] = (
    InPlaceCause(
        "ExecutorLostFailure",
        "an executor JVM died (killed, out of memory, its host lost); the driver's session "
        "and the checkpoint are intact and the cluster manager grants a replacement executor"),
)


def in_place_cause(failure: str) -> InPlaceCause | None:
    """The table's entry for this failure message, None if it needs a fresh process."""
    return next((cause for cause in IN_PLACE_CAUSES if cause.marker in failure), None)


@dataclass
class RestartBudget:
    """At most ``limit`` restarts within any ``window_s`` seconds; 0 allows none."""

    limit: int
    window_s: float = WINDOW_S
    clock: Callable[[], float] = time.monotonic
    _taken: deque[float] = field(default_factory=deque, init=False)

    def take(self) -> bool:
        """Spend one restart if the budget allows it now."""
        now = self.clock()
        while self._taken and now - self._taken[0] >= self.window_s:
            self._taken.popleft()
        if len(self._taken) >= self.limit:
            return False
        self._taken.append(now)
        return True

    @property
    def used(self) -> int:
        """Restarts taken within the current window."""
        return len(self._taken)


class InPlaceRestarts:
    """Whether a failed query starts again in this session, and its start again."""

    def __init__(self, budget: RestartBudget, restarting: Callable[[int], None]) -> None:
        """``restarting(n)``: told before the ``n``-th restart in the window starts
        (``QueryProbes.restarting``, which logs the recovery once it processes)."""
        self.budget = budget
        self._restarting = restarting

    def attempt(self, cause: str, start_again: Callable[[], None]) -> bool:
        """Run ``start_again`` if ``cause`` allows it and the budget lasts (True); False:
        the appliance must exit 1 (the cause needs a fresh process, the budget is spent,
        or ``start_again`` raised)."""
        known = in_place_cause(cause)
        if known is None:
            return False
        budget = self.budget
        if not budget.take():
            log.warning("query.restart_refused", marker=known.marker, limit=budget.limit,
                        window_s=budget.window_s,
                        reason="in-place restarts spent: a fresh process is next")
            return False
        self._restarting(budget.used)
        log.warning("query.restarting", cause=cause, reason=known.reason,
                    restart=budget.used, limit=budget.limit)
        try:
            start_again()
        except Exception as exc:  # noqa: BLE001 - any reason: exit 1 for the supervisor
            log.error("query.restart_failed", error=" ".join(str(exc).split())[:2000],
                      kind=type(exc).__name__)
            return False
        return True
