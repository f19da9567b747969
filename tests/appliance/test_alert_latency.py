"""The in-band alert latency histogram: header parsing, buckets, exposition."""

from __future__ import annotations

from kafka.record import util as kafka_record_util
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from appliance.observability.alert_latency import (
    BUCKETS_MS,
    METRIC,
    AlertObserver,
    LatencyHistogram,
    bucket_counts,
    checks_crc_in_python,
    latency_ms,
    observer_cpu_s,
    quantile_ms,
)
from appliance.query.alert_headers import SEVERITY_HEADER, SOURCE_TIMESTAMP_HEADER


def test_latency_from_headers():
    headers = [(SOURCE_TIMESTAMP_HEADER, b"1700000000000"), (SEVERITY_HEADER, b"critical")]
    assert latency_ms(1700000000012, headers) == ("critical", 12)
    assert latency_ms(1700000000012, headers[:1]) == ("unknown", 12)
    assert latency_ms(1700000000012, [(SEVERITY_HEADER, b"info")]) is None
    assert latency_ms(1700000000012, None) is None
    assert latency_ms(1700000000012, [(SOURCE_TIMESTAMP_HEADER, b"12x")]) is None


def test_histogram_buckets_resolve_milliseconds_and_expose_seconds():
    h = LatencyHistogram()
    for severity, ms in (("critical", 0), ("critical", 1), ("critical", 3), ("warning", 12),
                         ("warning", 20000), ("warning", -4)):
        h.observe_ms(severity, ms)
    assert BUCKETS_MS[0] == 0.5 and BUCKETS_MS[-1] == 10000
    registry = CollectorRegistry()
    registry.register(h)
    text = generate_latest(registry).decode()
    buckets = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == METRIC + "_bucket":
                buckets[(s.labels["severity"], s.labels["le"])] = s.value
            if s.name == METRIC + "_sum":
                buckets[(s.labels["severity"], "sum")] = s.value
            if s.name == "appliance_alert_latency_negative_total":
                buckets["negative"] = s.value
    assert buckets[("critical", "0.0005")] == 1   # the same millisecond
    assert buckets[("critical", "0.001")] == 2
    assert buckets[("critical", "0.003")] == 3
    assert buckets[("critical", "+Inf")] == 3
    assert buckets[("critical", "sum")] == 0.004
    assert buckets[("warning", "0.0005")] == 1    # negative filed as 0 ...
    assert buckets["negative"] == 1                 # ... and counted
    assert buckets[("warning", "0.015")] == 2
    assert buckets[("warning", "10.0")] == 2        # 20 s is above the last bound
    assert buckets[("warning", "+Inf")] == 3


def test_exposition_reads_back_into_buckets_and_quantiles():
    h = LatencyHistogram()
    for ms in [2] * 98 + [40, 20000]:
        h.observe_ms("critical", ms)
    h.observe_ms("info", 2)
    registry = CollectorRegistry()
    registry.register(h)
    counts = bucket_counts(generate_latest(registry).decode())
    assert sum(counts) == 101 and counts[-1] == 1  # +Inf kept apart
    assert counts[BUCKETS_MS.index(2)] == 99 and counts[BUCKETS_MS.index(40)] == 1
    assert 1 < quantile_ms(counts, 0.5) <= 2
    assert 30 < quantile_ms(counts, 0.99) <= 40
    assert quantile_ms([0] * len(counts), 0.99) is None


def test_fetched_batches_are_checked_by_the_c_crc():
    """The observer decodes every alert with kafka-python; its CRC-32C check must be the C
    one (the ``crc32c`` dependency), which is what the cost measured in the docs assumes."""
    assert not checks_crc_in_python()
    crc = kafka_record_util.calc_crc32c
    assert crc(b"123456789") == 0xE3069283  # the CRC-32C check value
    assert type(crc.__defaults__[0]).__name__ == "builtin_function_or_method"


def test_observer_cpu_reads_back_from_the_exposition():
    observer = AlertObserver(LatencyHistogram(), {}, "alerts")
    observer.cpu_seconds = 1.25
    registry = CollectorRegistry()
    registry.register(observer)
    assert observer_cpu_s(generate_latest(registry).decode()) == 1.25
    assert observer_cpu_s("") is None
