"""The log budget (``--retention-total-bytes``) never evicts what nobody has read (issue 53,
item 6): at the budget the broker refuses produce with Kafka's retriable
KAFKA_STORAGE_ERROR, real producers back off and deliver once a consumer group has read
on, and only ``--retention-total-policy keep-newest`` takes unread data, at WARN, counted
by reason in ``broker_log_evicted_bytes_total``."""

from __future__ import annotations

import json
import time

import confluent_kafka as ck
import pytest
from kafka import KafkaConsumer, KafkaProducer

from appliance.broker import EmbeddedBroker

from support.broker.java_programs import run_java
from support.scrape import samples as scrape_samples

BUDGET = 200_000
SEGMENT = 20_000
VALUE = 1000
RECORDS = 400  # twice the budget


def _args(*more: str) -> list[str]:
    return ["--retention-total-bytes", str(BUDGET), "--segment-bytes", str(SEGMENT),
            "--metrics-port", "0", "--group-initial-rebalance-delay-ms", "0", *more]


def _value(i: int) -> bytes:
    return b"%06d" % i + b"." * (VALUE - 6)


def _budget_samples(url: str) -> tuple[float, dict[str, float]]:
    s = scrape_samples(url)
    evicted = {dict(labels)["reason"]: v for (name, labels), v in s.items()
               if name == "broker_log_evicted_bytes_total"}
    return s[("broker_log_budget_refused_produces_total", ())], evicted


def _read_all(bootstrap: str, topic: str, want: int) -> list[tuple[int, bytes]]:
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "budget-audit",
                     "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        c.assign([ck.TopicPartition(topic, 0, ck.OFFSET_BEGINNING)])
        out: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + 30
        while len(out) < want and time.monotonic() < deadline:
            for m in c.consume(num_messages=500, timeout=0.2):
                assert m.error() is None, m.error()
                out.append((m.offset(), m.value()))
        return out
    finally:
        c.close()


def _events(log_path) -> list[dict]:
    return [json.loads(line) for line in log_path.read_text().splitlines()
            if line.startswith("{")]


def test_a_full_budget_refuses_produce_and_keeps_every_acknowledged_record(tmp_path):
    """No group reads the topic: nothing is evictable, so past the budget librdkafka's
    produces fail (after retrying) and every record it had acknowledged stays, from 0."""
    log_path = tmp_path / "broker.log"
    with EmbeddedBroker(data_dir=tmp_path / "data", topics={"unread": 1},
                        extra_args=_args(), log_path=log_path) as b:
        p = ck.Producer({"bootstrap.servers": b.bootstrap, "acks": "all", "linger.ms": 5,
                         "batch.size": 8192, "message.timeout.ms": 4000, "retry.backoff.ms": 100})
        acked: dict[int, bytes] = {}
        failed: list[str] = []

        def report(err, msg):
            if err is None:
                acked[msg.offset()] = msg.value()
            else:
                failed.append(err.name())

        for i in range(RECORDS):
            p.produce("unread", value=_value(i), partition=0, on_delivery=report)
            p.poll(0)
        assert p.flush(30) == 0
        assert failed and len(acked) + len(failed) == RECORDS
        assert BUDGET // (2 * VALUE) < len(acked) <= BUDGET // VALUE
        got = _read_all(b.bootstrap, "unread", len(acked))
        assert dict(got) == acked and min(acked) == 0  # nothing acknowledged went
        refused, evicted = _budget_samples(b.metrics_url)
        assert refused > 0 and evicted == {"read": 0, "unread": 0}
    full = [e for e in _events(log_path) if e["event"] == "broker.log_budget_full"]
    assert full and full[0]["level"] == "warning" and full[0]["topic"] == "unread"


def test_a_stalled_producer_delivers_once_a_group_has_read(tmp_path):
    """The producer backs off at the budget; a consumer group reads and commits; the
    broker then evicts what the group read (reason "read") and every record arrives, in
    order, none lost."""
    log_path = tmp_path / "broker.log"
    with EmbeddedBroker(data_dir=tmp_path / "data", topics={"stall": 1},
                        extra_args=_args(), log_path=log_path) as b:
        p = ck.Producer({"bootstrap.servers": b.bootstrap, "acks": "all", "linger.ms": 5,
                         "batch.size": 8192, "enable.idempotence": True,
                         "message.timeout.ms": 120_000})
        errors: list[str] = []
        acked: list[int] = []

        def report(err, msg):
            if err is None:
                acked.append(msg.offset())
            else:
                errors.append(err.name())

        for i in range(RECORDS):
            p.produce("stall", value=_value(i), partition=0, on_delivery=report)
        deadline = time.monotonic() + 30
        while _budget_samples(b.metrics_url)[0] == 0:  # the producer is being refused
            p.poll(0.2)
            assert time.monotonic() < deadline, "the broker never refused a produce"
        assert len(p) > 0 and len(acked) < RECORDS
        consumer = KafkaConsumer("stall", bootstrap_servers=b.bootstrap, group_id="readers",
                                 enable_auto_commit=False, auto_offset_reset="earliest")
        seen: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(seen) < RECORDS or len(p):
            for records in consumer.poll(timeout_ms=200).values():
                seen += [r.value for r in records]
            consumer.commit()
            p.poll(0)
            assert time.monotonic() < deadline, (len(seen), len(p), errors)
        consumer.close()
        assert p.flush(10) == 0 and not errors
        assert seen == [_value(i) for i in range(RECORDS)]
        assert sorted(acked) == list(range(RECORDS))
        refused, evicted = _budget_samples(b.metrics_url)
        assert refused > 0 and evicted["read"] > 0 and evicted["unread"] == 0
    evictions = [e for e in _events(log_path) if e["event"] == "broker.log_evicted"]
    assert evictions and {(e["level"], e["reason"]) for e in evictions} == {
        ("warning", "read")}


def test_keep_newest_evicts_unread_records_at_warn_and_counts_them(tmp_path):
    """The operator's choice: producers are never refused, the oldest unread data goes,
    each eviction a WARN line and counted as "unread"."""
    log_path = tmp_path / "broker.log"
    with EmbeddedBroker(topics={"newest": 1}, log_path=log_path,
                        extra_args=_args("--retention-total-policy", "keep-newest")) as b:
        producer = KafkaProducer(bootstrap_servers=b.bootstrap, acks=1, linger_ms=5)
        for i in range(RECORDS):
            producer.send("newest", value=_value(i), partition=0)
        producer.flush(30)
        producer.close()
        refused, evicted = _budget_samples(b.metrics_url)
        assert refused == 0 and evicted["unread"] > 0 and evicted["read"] == 0
        got = _read_all(b.bootstrap, "newest", 1)
        assert got and got[0][0] > 0  # the log start moved past unread records
    evictions = [e for e in _events(log_path) if e["event"] == "broker.log_evicted"]
    assert evictions and all(e["level"] == "warning" and e["reason"] == "unread"
                             for e in evictions)


@pytest.mark.java
def test_the_java_producer_is_refused_retriably_at_a_full_budget(tmp_path, java_checks):
    """The Java client retries KAFKA_STORAGE_ERROR (retriable) until its delivery timeout
    runs out, then fails the record with a TimeoutException; what it had acknowledged
    stays, from offset 0."""
    with EmbeddedBroker(data_dir=tmp_path / "data", topics={"jfull": 1},
                        extra_args=_args(), log_path=tmp_path / "b.log") as b:
        out = run_java(java_checks, "LogKeepCheck", b.bootstrap, "produce", "jfull",
                       str(RECORDS), str(VALUE), "3000")
        assert out["ERROR"] == "TimeoutException" and int(out["FAILED"]) > 0
        acked = int(out["ACKED"])
        assert BUDGET // (2 * VALUE) < acked <= BUDGET // VALUE
        assert out["FIRST_ACKED"] == "0"
        assert len(_read_all(b.bootstrap, "jfull", acked)) == acked
