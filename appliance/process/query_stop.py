"""Stopping the query where a restart on its checkpoint replays the least.

A query started again on its checkpoint re-runs its last uncommitted epoch or batch from
that one's start offsets. Epochs and micro-batches commit within an interval, so a stop
anywhere replays at most that. A real-time batch commits only at its end, minutes away (5
by default): a lone instance stopped mid-batch (a systemd restart, a deploy's upgrade,
``appliance run`` stopped and started again) re-read minutes of events on its next run,
their alerts again, before its first new one. Where the trigger says so
(``TriggerMode.stop_at``), the stop first asks the connector to end the running batch
(``BatchEnd`` in the connector: its readers stop reading, Spark commits the batch with
the offsets read so far), waits for that commit in the checkpoint, and only then stops
the query. Each step is bounded and the query stops either way: when SIGTERM went to the
whole process group, Spark's JVM is already on its way out and the request goes nowhere.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from appliance import logs
from appliance.connector import driver_jvm
from appliance.query.checkpoint import batch_ids
from appliance.trigger import StopAt, TriggerMode

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import StreamingQuery

#: How long a stop waits for the running batch's commit before it stops the query anyway
#: (a bound: the readers notice the request within 100 ms, the commit follows the sink's
#: flush; well inside the unit's TimeoutStopSec of 60 s).
END_WAIT_S = 15.0
#: How often the end is asked for again while no batch committed.
ASK_AGAIN_S = 1.0

log = logs.get_logger("appliance")


def stop_query(query: StreamingQuery, spark: SparkSession | None, mode: TriggerMode,
               checkpoint_dir: str, wait_s: float = END_WAIT_S) -> None:
    """Stop ``query``, at its running batch's committed end where ``mode`` says so."""
    if mode.stop_at is StopAt.BATCH_END and spark is not None:
        end_running_batch(query, spark, checkpoint_dir, wait_s)
    query.stop()


def end_running_batch(query: StreamingQuery, spark: SparkSession, checkpoint_dir: str,
                      wait_s: float) -> bool:
    """Ask the real-time source to end its running batch and wait until the checkpoint
    commits a batch; True once it has. A real-time batch writes its offsets entry only at
    its end too, so the checkpoint cannot say which batch runs: the ask is repeated every
    ``ASK_AGAIN_S``, for a batch planned just after it (the ask reaches only batches
    planned before it)."""
    root = Path(checkpoint_dir)
    before = max(batch_ids(root / "commits"), default=-1)
    started = time.monotonic()
    deadline, ask_at = started + wait_s, started
    while time.monotonic() < deadline:
        if time.monotonic() >= ask_at:
            try:
                asked = driver_jvm(spark).io.appliance.kafka.BatchEnd.request(
                    str(root.absolute()))
            except Exception as exc:  # noqa: BLE001 - the JVM went away: a plain stop
                log.warning("query.batch_end_failed", error=" ".join(str(exc).split())[:300])
                return False
            if not asked:
                log.warning("query.batch_end_unavailable",
                            reason="no real-time stream of this query runs: it stops where "
                                   "it is")
                return False
            ask_at = time.monotonic() + ASK_AGAIN_S
        committed = max(batch_ids(root / "commits"), default=-1)
        if committed > before:
            log.info("query.batch_ended", batch_id=committed,
                     seconds=round(time.monotonic() - started, 3))
            return True
        if not _active(query):
            break
        time.sleep(0.05)
    log.warning("query.batch_end_timed_out", waited_s=round(time.monotonic() - started, 3),
                consequence="the next run replays the running batch from its start")
    return False


def _active(query: StreamingQuery) -> bool:
    try:
        return bool(query.isActive)
    except Exception:  # noqa: BLE001 - the JVM went away
        return False
