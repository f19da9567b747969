"""Prometheus metrics (``appliance_*``) computed from facts that hold in every trigger mode.

Continuous mode reports no per-batch progress, so instead of Spark's progress events we
use two sources that always exist: the query's checkpoint (the offsets it has committed,
``<checkpoint>/commits`` + ``<checkpoint>/offsets``) and Kafka's end offsets of the input,
alert and dead-letter topics. Counters are "since this process started". The lag in time
(``appliance_consumer_lag_seconds``, the age of the next unread record) is ``lag_age``'s.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kafka import KafkaConsumer
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from appliance.observability.lag_age import NextRecordTimes, PartitionKey, lag_ages
from appliance.query.checkpoint import committed_offsets
from appliance.topics import end_offsets, offsets_consumer


def last_commit_time(checkpoint_dir: str | Path) -> float | None:
    """Unix time of the newest ``commits/<id>`` file: when the last batch/epoch finished."""
    newest = None
    for path in (Path(checkpoint_dir) / "commits").glob("[0-9]*"):
        if path.name.isdigit():
            try:
                mtime = path.stat().st_mtime
            except OSError:
                continue
            newest = mtime if newest is None else max(newest, mtime)
    return newest


@dataclass
class Snapshot:
    """What the collector reports; replaced as a whole by the poller (no partial reads)."""

    query_up: bool = False
    events_read: int = 0
    alerts_written: int = 0
    dead_letters_written: int = 0
    lag: dict[PartitionKey, int] = field(default_factory=dict)
    # Age of the next unread record per partition (lag_age.py); 0 when caught up.
    lag_seconds: dict[PartitionKey, float] = field(default_factory=dict)
    committed: dict[PartitionKey, int] = field(default_factory=dict)
    # Seconds since the query last made progress (batch or epoch); None before the first.
    progress_age_s: float | None = None


class ApplianceCollector:
    """prometheus-client collector over the latest ``Snapshot``."""

    def __init__(self, trigger: str, recovered: bool = False, progress_interval_s: float = 1.0):
        """``trigger``: the trigger mode's name. The rules metrics have a collector of
        their own (``appliance.observability.rules_metrics``): they change on reload."""
        self.trigger = trigger
        # How often a healthy query commits or reports progress: what the progress age is
        # compared with (ApplianceQueryStalled), since real-time batches last minutes.
        self.progress_interval_s = progress_interval_s
        # 1 when this process resumed the query from an existing checkpoint (a restart
        # after a stop or crash), plus one per restart in place (appliance.process.restarts);
        # Prometheus' increase() sums it across process restarts.
        self.recoveries = 1 if recovered else 0
        self.started = time.time()
        self.snapshot = Snapshot()

    def collect(self):
        snap = self.snapshot
        up = GaugeMetricFamily("appliance_query_up", "1 while the streaming query runs")
        up.add_metric([], 1.0 if snap.query_up else 0.0)
        yield up
        mode = GaugeMetricFamily("appliance_trigger_info", "trigger mode of the query",
                                 labels=["trigger"])
        mode.add_metric([self.trigger], 1.0)
        yield mode
        recoveries = CounterMetricFamily(
            "appliance_recoveries", "query starts that resumed from an existing checkpoint")
        recoveries.add_metric([], float(self.recoveries))
        yield recoveries
        started = GaugeMetricFamily("appliance_start_time_seconds",
                                    "unix time this appliance process started its query")
        started.add_metric([], self.started)
        yield started
        interval = GaugeMetricFamily(
            "appliance_query_progress_interval_seconds",
            "how often the healthy query commits or reports progress: the epoch interval "
            "(continuous), the batch duration (real-time), the trigger or idle-progress "
            "interval (micro-batch)")
        interval.add_metric([], self.progress_interval_s)
        yield interval
        if snap.progress_age_s is not None:
            age = GaugeMetricFamily("appliance_query_last_progress_age_seconds",
                                    "seconds since the query last committed a batch or epoch")
            age.add_metric([], snap.progress_age_s)
            yield age
        for name, value, text in (
                ("appliance_events_read", snap.events_read,
                 "input records committed by the query since start"),
                ("appliance_alerts_written", snap.alerts_written,
                 "records appended to the alerts topic since start"),
                ("appliance_dead_letters_written", snap.dead_letters_written,
                 "records appended to the dead-letter topic since start")):
            counter = CounterMetricFamily(name, text)
            counter.add_metric([], float(value))
            yield counter
        for name, text, values in (
                ("appliance_consumer_lag",
                 "Kafka end offset minus the query's committed offset", snap.lag),
                ("appliance_consumer_lag_seconds",
                 "age of the oldest unread event: now minus the Kafka timestamp of the "
                 "record at the query's committed offset; 0 when caught up",
                 snap.lag_seconds),
                ("appliance_committed_offset",
                 "offset below which the query processed every event (its alerts in "
                 "Kafka)", snap.committed)):
            gauge = GaugeMetricFamily(name, text, labels=["topic", "partition"])
            for (topic, part), reading in sorted(values.items()):
                gauge.add_metric([topic, str(part)], float(reading))
            yield gauge


class MetricsPoller:
    """Refreshes the collector's snapshot every ``period`` seconds on a daemon thread."""

    def __init__(self, collector: ApplianceCollector, client_config: dict, topics,
                 checkpoint_dir: str, is_up, period: float = 1.0, last_progress=None,
                 processed: Callable[[], dict[int, int]] | None = None):
        """``last_progress``: optional callable giving the unix time of the query's last
        progress report (micro-batch reports idle progress too; continuous reports none,
        so the newest checkpoint commit is used as well). ``processed``: where the lag
        is counted from, the events topic's processed offset per partition; by default
        this instance's checkpoint. A pair's instances (``[ha]``) count from the offsets
        the pair committed to Kafka instead: a waiting standby's own checkpoint is as old
        as the last time it served, and its lag would be a stale, growing figure."""
        self.collector = collector
        self.client_config = client_config
        self.topics = topics
        self.checkpoint_dir = checkpoint_dir
        self.is_up = is_up
        self.period = period
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._consumer: KafkaConsumer | None = None
        self._next_times = NextRecordTimes(client_config)
        self._baseline: dict[str, int] | None = None
        self.last_progress = last_progress
        self.processed = processed or self._checkpointed

    def _checkpointed(self) -> dict[int, int]:
        return committed_offsets(self.checkpoint_dir).get(self.topics.events, {})

    def _totals(self) -> tuple[dict[str, dict[int, int]], dict[str, int]]:
        ends = end_offsets(self._consumer, (self.topics.events, self.topics.alerts,
                                            self.topics.dead_letters))
        return ends, {t: sum(v.values()) for t, v in ends.items()}

    def poll_once(self) -> None:
        if self._consumer is None:
            self._consumer = offsets_consumer(self.client_config)
        ends, totals = self._totals()
        committed = self.processed()
        read_total = sum(committed.values())
        if self._baseline is None:
            self._baseline = dict(totals, read=read_total)
        events_ends = ends[self.topics.events]
        progress = [t for t in (last_commit_time(self.checkpoint_dir),
                                self.last_progress() if self.last_progress else None)
                    if t is not None]
        self.collector.snapshot = Snapshot(
            query_up=bool(self.is_up()),
            events_read=max(0, read_total - self._baseline["read"]),
            alerts_written=max(0, totals[self.topics.alerts]
                               - self._baseline[self.topics.alerts]),
            dead_letters_written=max(0, totals[self.topics.dead_letters]
                                     - self._baseline[self.topics.dead_letters]),
            lag={PartitionKey(self.topics.events, p): max(0, end - committed.get(p, 0))
                 for p, end in events_ends.items()},
            lag_seconds=lag_ages(events_ends, committed, self.topics.events,
                                 self._next_times),
            committed={PartitionKey(self.topics.events, p): off
                       for p, off in committed.items()},
            progress_age_s=max(0.0, time.time() - max(progress)) if progress else None,
        )

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.poll_once()
            except Exception:  # a broker hiccup must not kill metrics; retry next period
                pass
            self._stop.wait(self.period)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="metrics-poller", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._consumer is not None:
            self._consumer.close()
        self._next_times.close()
        close = getattr(self.processed, "close", None)
        if close is not None:
            close()
