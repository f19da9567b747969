"""In-band alert latency: how late each alert is, measured by the appliance itself.

Definition (the metric ``appliance_alert_latency_seconds{severity}``): the alert record's
Kafka timestamp minus the Kafka timestamp of the event record it was raised for. With
Kafka's default ``CreateTime`` topics that is "the event's producer handed it to Kafka" to
"the appliance's sink handed the alert to Kafka"; with ``LogAppendTime`` topics, broker
append to broker append. Both timestamps are Kafka facts, so the number does not depend on
how fast anybody reads the alerts: the observer below may fall behind under load and still
records the right latencies, just later.

How: the query copies the event record's timestamp into a header of the alert it writes
(``appliance.query.pipeline``, no extra JSON field, the alert contract is unchanged), and a
daemon thread here reads the alerts topic from its end (no consumer group, nothing
committed) and files ``alert.timestamp - header`` into a histogram. That works the same in
every trigger mode and needs no load generator. Its cost is one fetch stream of the alerts
topic and a header lookup per alert, in the appliance's Python process, off the query's
path (``bench/alert_latency_cost.py`` measures it). Most of that is kafka-python decoding
the fetched batches; their CRC-32C check must be the C one from the ``crc32c`` package (a
dependency), or it alone costs four times the rest: ``start`` warns when it is missing.

Kafka timestamps are whole milliseconds, so a single latency is exact to +-1 ms; the
buckets still start at 0.5 ms so that "same millisecond" (0) is told apart from 1 ms.
"""

from __future__ import annotations

import importlib.util
import threading
import time
from bisect import bisect_left
from collections.abc import Iterable

from kafka import KafkaConsumer, TopicPartition
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily
from prometheus_client.parser import text_string_to_metric_families

from appliance import logs
from appliance.query.alert_headers import SEVERITY_HEADER, SOURCE_TIMESTAMP_HEADER

METRIC = "appliance_alert_latency_seconds"
OBSERVER_CPU_METRIC = "appliance_alert_latency_observer_cpu_seconds"  # + "_total" exposed
# Upper bounds in milliseconds: fine where a millisecond appliance lives, coarse above.
BUCKETS_MS = (0.5, 1, 2, 3, 4, 5, 7.5, 10, 15, 20, 25, 30, 40, 50, 75, 100, 150, 200, 300,
              500, 750, 1000, 2000, 5000, 10000)
UNKNOWN_SEVERITY = "unknown"
FETCH_WAIT_MS = 500
FETCH_MIN_BYTES = 256 * 1024

log = logs.get_logger("appliance.alert_latency")


class LatencyHistogram:
    """Per-severity bucket counts with one writer (the observer thread), no lock.

    The scrape thread copies the lists; a scrape that races an update can see a count one
    behind its bucket, which the next scrape corrects (counters only grow).
    """

    def __init__(self) -> None:
        self.counts: dict[str, list[int]] = {}
        self.sums_ms: dict[str, int] = {}
        self.negative = 0  # alert stamped before its event: producer clocks disagree

    def observe_ms(self, severity: str, latency_ms: int) -> None:
        counts = self.counts.get(severity)
        if counts is None:
            counts = self.counts[severity] = [0] * (len(BUCKETS_MS) + 1)
            self.sums_ms[severity] = 0
        if latency_ms < 0:
            self.negative += 1
            latency_ms = 0
        counts[bisect_left(BUCKETS_MS, latency_ms)] += 1
        self.sums_ms[severity] += latency_ms

    def collect(self) -> Iterable:
        family = HistogramMetricFamily(
            METRIC, "alert record's Kafka timestamp minus its event record's Kafka timestamp",
            labels=["severity"])
        for severity, counts in sorted(self.counts.items()):
            counts = list(counts)
            cumulative, buckets = 0, []
            for bound, count in zip((*BUCKETS_MS, float("inf")), counts, strict=True):
                cumulative += count
                buckets.append(("+Inf" if bound == float("inf") else repr(bound / 1000.0),
                                float(cumulative)))
            family.add_metric([severity], buckets, self.sums_ms[severity] / 1000.0)
        yield family
        skew = CounterMetricFamily(
            "appliance_alert_latency_negative",
            "alerts stamped before their event (producer clocks disagree), counted as 0")
        skew.add_metric([], float(self.negative))
        yield skew


def bucket_counts(exposition: str) -> list[int]:
    """Per-bucket counts (all severities summed, +Inf last) from a ``/metrics`` text:
    what Prometheus scrapes, turned back into this histogram's buckets."""
    index = {bound: i for i, bound in enumerate(BUCKETS_MS)}
    cumulative = [0.0] * (len(BUCKETS_MS) + 1)
    for family in text_string_to_metric_families(exposition):
        if family.name != METRIC:
            continue
        for sample in family.samples:
            if sample.name == METRIC + "_bucket":
                le = float(sample.labels["le"])
                i = len(BUCKETS_MS) if le == float("inf") else index[round(le * 1000.0, 6)]
                cumulative[i] += sample.value
    return [int(round(c - p)) for c, p in zip(cumulative, [0.0, *cumulative[:-1]],
                                              strict=True)]


def observer_cpu_s(exposition: str) -> float | None:
    """The observer thread's CPU seconds from a ``/metrics`` text, None if not exported."""
    for family in text_string_to_metric_families(exposition):
        for sample in family.samples:
            if sample.name == OBSERVER_CPU_METRIC + "_total":
                return sample.value
    return None


def quantile_ms(counts: list[int], q: float) -> float | None:
    """``q`` quantile in ms from per-bucket counts, interpolated inside the bucket like
    Prometheus' ``histogram_quantile``; None without observations."""
    total = sum(counts)
    if total == 0:
        return None
    rank, below, lower = q * total, 0, 0.0
    for bound, count in zip((*BUCKETS_MS, float("inf")), counts, strict=True):
        if below + count >= rank and count > 0:
            if bound == float("inf"):
                return lower
            return round(lower + (bound - lower) * (rank - below) / count, 3)
        below, lower = below + count, bound
    return lower


def latency_ms(alert_timestamp_ms: int, headers) -> tuple[str, int] | None:
    """(severity, latency in ms) of one alert record, None without the source header."""
    source = severity = None
    for key, value in headers or ():
        if key == SOURCE_TIMESTAMP_HEADER:
            source = value
        elif key == SEVERITY_HEADER:
            severity = value
    if source is None:
        return None
    try:
        source_ms = int(source)
    except ValueError:
        return None
    name = severity.decode("ascii", "replace") if severity else UNKNOWN_SEVERITY
    return name, alert_timestamp_ms - source_ms


def checks_crc_in_python() -> bool:
    """True when the ``crc32c`` package, kafka-python's C CRC-32C, is not installed: then
    kafka-python checks every fetched batch in Python."""
    return importlib.util.find_spec("crc32c") is None


class AlertObserver:
    """Reads the alerts topic from its current end and fills a ``LatencyHistogram``.

    Also a collector of its own cost, the CPU time of its thread
    (``appliance_alert_latency_observer_cpu_seconds_total``): the share of the appliance's
    CPU the metric takes, measurable even when the machine is saturated, where comparing
    the appliance's CPU with and without the metric cannot tell (both are capped).
    """

    def __init__(self, histogram: LatencyHistogram, client_config: dict, topic: str,
                 max_records: int = 2000) -> None:
        self.histogram = histogram
        self.client_config = client_config
        self.topic = topic
        self.max_records = max_records
        self.observed = 0
        self.cpu_seconds = 0.0  # this thread's own CPU time (bench: the metric's cost)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _consumer(self) -> KafkaConsumer:
        # Large fetches: the latencies come from Kafka timestamps, so reading them half a
        # second later changes no value, and kafka-python's cost is per fetch as much as
        # per record. At 1,000 alerts/s this thread took 200 us of CPU per alert with
        # fetches returning at once and 30 us with these settings (measured).
        consumer = KafkaConsumer(**self.client_config, group_id=None,
                                 enable_auto_commit=False, fetch_max_wait_ms=FETCH_WAIT_MS,
                                 fetch_min_bytes=FETCH_MIN_BYTES,
                                 max_poll_records=self.max_records)
        partitions = consumer.partitions_for_topic(self.topic) or set()
        assignment = [TopicPartition(self.topic, p) for p in sorted(partitions)]
        consumer.assign(assignment)
        consumer.seek_to_end(*assignment)
        for tp in assignment:
            consumer.position(tp)  # resolve "end" now: alerts before this are not ours
        return consumer

    def _loop(self) -> None:
        consumer = None
        while not self._stop.is_set():
            try:
                if consumer is None:
                    consumer = self._consumer()
                    log.info("alert_latency.observing", topic=self.topic)
                batches = consumer.poll(timeout_ms=200, max_records=self.max_records)
                observe = self.histogram.observe_ms
                for records in batches.values():
                    for record in records:
                        result = latency_ms(record.timestamp, record.headers)
                        if result is not None:
                            observe(*result)
                            self.observed += 1
            except Exception as exc:  # a broker hiccup must not end the metric
                log.warning("alert_latency.observer_error",
                            error=" ".join(str(exc).split())[:300])
                if consumer is not None:
                    try:
                        consumer.close()
                    except Exception:
                        pass
                    consumer = None
                self._stop.wait(1.0)
            self.cpu_seconds = time.thread_time()
        if consumer is not None:
            consumer.close()

    def collect(self) -> Iterable:
        cpu = CounterMetricFamily(
            OBSERVER_CPU_METRIC,
            "CPU time of the thread that reads the alerts for the latency histogram")
        cpu.add_metric([], self.cpu_seconds)
        yield cpu

    def start(self) -> None:
        if checks_crc_in_python():
            log.warning("alert_latency.slow_crc",
                        hint="pip install crc32c: kafka-python is checking CRCs in Python")
        self._thread = threading.Thread(target=self._loop, name="alert-latency", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
