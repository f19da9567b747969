"""What the runner knows of its started query: is it processing, has it committed, did it die.

``TriggerMode.is_processing`` decides from three probes (``appliance.trigger.QueryProbe``)
when a query processes events as they come; this module answers them for the query the
runner started last (tasks launched, epochs or batches committed, progress reported) and
keeps the rest of what the runner and a rules swap ask of that query: waiting until it
processes, whether it ended and why, and its progress line for the bench. One object for
the appliance's whole life; ``started`` points it at each new query (a start, a restart in
place, a rules swap).
"""

from __future__ import annotations

import json
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from appliance import logs
from appliance.connector import driver_jvm
from appliance.query.checkpoint import batch_ids, committed_offsets, processed_past
from appliance.trigger import ProcessedFrom, TriggerMode

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import StreamingQuery

# How long a new query may take to start processing before the runner gives up (exit 1,
# or a swap goes back to the old rules): a bound, not an expectation (a fresh query runs
# within seconds; a machine shared with much other work has been seen to need minutes).
READY_TIMEOUT_S = 600.0
#: At most how often ``log_progress`` logs a micro-batch/real-time query's progress.
PROGRESS_LOG_S = 10.0

log = logs.get_logger("appliance")


class QueryProbes:
    """The probes of the query the runner started last (``appliance.trigger.QueryProbe``)."""

    def __init__(self, mode: TriggerMode, checkpoint_dir: str):
        self.mode = mode
        self.checkpoint_dir = checkpoint_dir
        self.partitions = 0  # the events topic's, once the broker is up
        self.query: StreamingQuery | None = None
        self._spark: SparkSession | None = None
        self._commits_at_start: set[int] = set()
        self._processing = False
        self._next_progress_log = 0.0
        self._recovering: tuple[float, int] | None = None  # (failed at, restarts so far)

    def _started_query(self) -> StreamingQuery:
        if self.query is None:
            raise RuntimeError("no query started: start_query() comes first")
        return self.query

    def _session(self) -> SparkSession:
        if self._spark is None:
            raise RuntimeError("no SparkSession: start_spark() comes first")
        return self._spark

    # -- pointing at a new query ---------------------------------------------------------
    def starting(self) -> bool:
        """Before a query starts: what is committed now is not its own (see
        ``epochs_committed``). True if the checkpoint had commits (the query resumes)."""
        self._commits_at_start = self.commits()
        self._processing = False
        return bool(self._commits_at_start)

    def started(self, query: StreamingQuery, spark: SparkSession) -> None:
        self.query, self._spark = query, spark

    def restarting(self, restarts: int) -> None:
        """A failed query is being started again in place: its first processing is logged
        as ``query.recovered`` with the time since now."""
        self._processing = False
        self._recovering = (time.monotonic(), restarts)

    # -- what TriggerMode.is_processing asks ---------------------------------------------
    def commits(self) -> set[int]:
        """The epochs or batches the checkpoint has committed."""
        return set(batch_ids(Path(self.checkpoint_dir) / "commits"))

    def epochs_committed(self) -> int:
        """Epochs or batches committed since the current query started."""
        return len(self.commits() - self._commits_at_start)

    def tasks_launched(self) -> int:
        """Tasks the driver's task scheduler has launched and not yet seen end, over all
        executors. The scheduler counts a task as it launches it; the status tracker hears
        of it later, through the listener bus, which at start-up lagged up to 6-8 s (see
        ``running``). ``taskScheduler`` is Spark-internal, reached through py4j. The count
        is not per query: the appliance's session runs no other job while its query runs."""
        per_executor = self._session().sparkContext._jsc.sc().taskScheduler() \
            .runningTasksByExecutors().values().iterator()
        launched = 0
        while per_executor.hasNext():
            launched += per_executor.next()
        return launched

    def progress_reported(self) -> bool:
        return self._started_query().lastProgress is not None

    def running(self) -> bool:
        """Whether the query processes events as they come (``TriggerMode.ready``)."""
        return self.mode.is_processing(self, self.partitions)

    # -- waiting and watching ------------------------------------------------------------
    def log_processing(self) -> bool:
        """Log ``query.processing`` once, when the query is running (``running``)."""
        if not self._processing and self.query is not None:
            try:
                self._processing = self.running()
            except Exception:  # noqa: BLE001 - the JVM went away: not running
                self._processing = False
            if self._processing:
                log.info("query.processing", trigger=self.mode.name)
                if self._recovering is not None:
                    failed_at, restarts = self._recovering
                    log.info("query.recovered", restarts=restarts,
                             seconds=round(time.monotonic() - failed_at, 2))
                    self._recovering = None
        return self._processing

    def wait_until_processing(self, timeout: float = 60.0) -> bool:
        """True once the query's tasks really run (see ``running``); False if it ended or
        ``timeout`` passed first."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.log_processing():
                return True
            if self.terminated(0.1):
                return False
        return False

    def processed(self, topic: str) -> dict[int, int]:
        """``topic``'s offsets (next to read) below which every event was processed and its
        alerts acknowledged: the newest committed epoch or batch, and where the trigger has
        them (``TriggerMode.processed_from``), the running real-time batch's durable marks.
        Safe from any thread (the pair's election reads it once a second)."""
        done = dict(committed_offsets(self.checkpoint_dir).get(topic, {}))
        if self.mode.processed_from is ProcessedFrom.CHECKPOINT_AND_MARKS:
            for part, offset in self.durable_marks().get(topic, {}).items():
                if offset > done.get(part, -1):
                    done[part] = offset
        return done

    def durable_marks(self) -> dict[str, dict[int, int]]:
        """The connector's durable marks of the real-time query running on this checkpoint
        (``ProgressMarks.durable``; empty without a running one, or without a JVM)."""
        if self._spark is None:
            return {}
        try:
            text = driver_jvm(self._spark).io.appliance.kafka.ProgressMarks.durable(
                str(Path(self.checkpoint_dir).absolute()))
            marks = json.loads(str(text))
        except Exception:  # noqa: BLE001 - the JVM went away: the checkpoint alone
            return {}
        return {topic: {int(p): int(o) for p, o in parts.items()}
                for topic, parts in marks.items()}

    def wait_until_past(self, topic: str, target: dict[int, int], timeout: float,
                        stop: threading.Event | None = None) -> bool:
        """True once the query processed ``topic`` up to ``target`` (every partition it
        names; ``processed``); False if the query ended, ``stop`` was set or ``timeout``
        passed first."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not (stop is not None and stop.is_set()):
            if processed_past(self.processed(topic), target):
                return True
            if self.terminated(0.1):
                return False
        return False

    def terminated(self, timeout: float) -> bool:
        """Wait up to ``timeout`` s; True if the query ended (awaitTermination raises then)."""
        try:
            # pyspark annotates the timeout as int, but takes (and documents) seconds as
            # any number: a float is what it converts to milliseconds.
            return bool(self._started_query().awaitTermination(timeout))  # type: ignore[arg-type]
        except Exception:
            return True

    def active(self) -> bool:
        try:
            return self.query is not None and self.query.isActive
        except Exception:
            return False

    def failure(self) -> str | None:
        """The query's cause of death, or None while it runs or after a clean stop."""
        if self.query is None:
            return None
        error = self.query.exception()
        if error is None:
            return None
        cause = str(error).split("=== Streaming Query ===")[0]  # drop the plan dump
        return " ".join(cause.split())[:2000]

    def last_progress_time(self) -> float | None:
        """Unix time of the query's last progress report (None in continuous mode)."""
        try:
            progress = self.query.lastProgress if self.query is not None else None
        except Exception:
            return None
        if not progress or not progress.get("timestamp"):
            return None
        return datetime.fromisoformat(progress["timestamp"].replace("Z", "+00:00")).timestamp()

    def log_progress(self) -> None:
        """Log where a micro-batch/real-time batch spent its time (``durationMs`` per
        phase of Spark's last progress), at most every PROGRESS_LOG_S: the bench reads it."""
        now = time.monotonic()
        if not self.mode.reports_progress or now < self._next_progress_log:
            return
        self._next_progress_log = now + PROGRESS_LOG_S
        try:
            progress = self._started_query().lastProgress
        except Exception:  # noqa: BLE001 - the JVM went away; serve() reports that
            return
        if progress:
            log.info("query.progress", batch_id=progress.get("batchId"),
                     input_rows=progress.get("numInputRows"),
                     durationMs=progress.get("durationMs"))
