"""Log compaction (issue 53, item 2) with real clients: a topic created compacted by
librdkafka's admin client, written by librdkafka, read back from the beginning by
kafka-python: each key's newest record at its original offset, tombstones kept for
``delete.retention.ms`` and then removed, and a kill -9 at either point of a pass (its
files written, or the swap decided) losing nothing."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

from appliance.broker import EmbeddedBroker
from appliance.broker.storage import cleaned_swap, cleaner
from appliance.broker.storage.cleaner import CleanJob, SegmentFile
from appliance.broker.storage.segment_file import SUFFIX

from support.broker.java_programs import run_java
from support.scrape import samples as scrape_samples

KEYS = 40
VERSIONS = 12
DELETED = range(0, 8)  # keys whose last record is a tombstone
COMPACTED = {"cleanup.policy": "compact", "segment.bytes": "4096",
             "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "86400000"}


def _create(bootstrap: str, topic: str, configs: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config=configs)])[topic].result(timeout=30)


def _produce(bootstrap: str, topic: str, records: list[tuple[bytes, bytes | None]]
             ) -> list[int]:
    """librdkafka, in order; the offset each record got."""
    p = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 2, "batch.size": 2048,
                     "enable.idempotence": True, "compression.type": "gzip"})
    offsets: list[int] = [0] * len(records)

    def on(i):
        return lambda err, msg: offsets.__setitem__(i, -1 if err else msg.offset())

    for i, (key, value) in enumerate(records):
        p.produce(topic, key=key, value=value, partition=0, on_delivery=on(i))
        p.poll(0)
    assert p.flush(30) == 0
    assert -1 not in offsets
    return offsets


def _workload() -> list[tuple[bytes, bytes | None]]:
    out: list[tuple[bytes, bytes | None]] = []
    for v in range(VERSIONS):
        for k in range(KEYS):
            out.append((b"key-%03d" % k, b"v%02d-" % v + b"x" * 60))
    out += [(b"key-%03d" % k, None) for k in DELETED]
    return out


def _filler(n: int, tag: str) -> list[tuple[bytes, bytes | None]]:
    """Distinct keys (each kept): they push the workload out of the active segment."""
    return [(f"fill-{tag}-{i}".encode(), os.urandom(100)) for i in range(n)]


def _read_all(bootstrap: str, topic: str) -> list[tuple[int, bytes | None, bytes | None]]:
    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                      auto_offset_reset="earliest", consumer_timeout_ms=3000)
    c.assign([TopicPartition(topic, 0)])
    got = [(m.offset, m.key, m.value) for m in c]
    c.close()
    return got


def _expected(records, offsets, drop_tombstones: bool) -> dict[bytes, tuple[int, bytes | None]]:
    newest: dict[bytes, tuple[int, bytes | None]] = {}
    for (key, value), offset in zip(records, offsets, strict=True):
        newest[key] = (offset, value)
    if drop_tombstones:
        newest = {k: v for k, v in newest.items() if v[1] is not None}
    return newest


def _wait_compacted(bootstrap: str, topic: str, want: dict, timeout: float = 30) -> list:
    """Until every workload key is seen once, at its newest offset (the cleaner runs
    every second)."""
    deadline = time.monotonic() + timeout
    while True:
        got = _read_all(bootstrap, topic)
        seen = {}
        for offset, key, value in got:
            if key is not None and key.startswith(b"key-"):
                seen.setdefault(key, []).append((offset, value))
        if all(len(v) == 1 for v in seen.values()) and {
                k: v[0] for k, v in seen.items()} == want:
            return got
        assert time.monotonic() < deadline, (len(got), sorted(seen.items())[:3])
        time.sleep(0.5)


def _cleaned_events(log_path: Path) -> list[dict]:
    return [e for e in (json.loads(line) for line in log_path.read_text().splitlines()
                        if line.startswith("{")) if e["event"] == "broker.log_cleaned"]


def test_a_compacted_topic_keeps_each_keys_newest_record_and_then_drops_tombstones(
        tmp_path):
    log_path = tmp_path / "broker.log"
    with EmbeddedBroker(data_dir=tmp_path / "data", log_path=log_path,
                        extra_args=["--metrics-port", "0"]) as b:
        _create(b.bootstrap, "compacted", COMPACTED)
        records = _workload()
        offsets = _produce(b.bootstrap, "compacted", records)
        _produce(b.bootstrap, "compacted", _filler(60, "a"))
        got = _wait_compacted(b.bootstrap, "compacted", {
            k: v for k, v in _expected(records, offsets, False).items()
            if k.startswith(b"key-")})
        assert [o for o, _, _ in got] == sorted(o for o, _, _ in got)  # offsets kept
        tombstones = [k for _, k, v in got if v is None]
        assert sorted(tombstones) == [b"key-%03d" % k for k in DELETED]
        # tombstones go once older than delete.retention.ms (kafka-python alters it)
        kp = KafkaAdminClient(bootstrap_servers=b.bootstrap)
        try:
            kp.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "compacted",
                                             configs={**COMPACTED,
                                                      "delete.retention.ms": "0"})])
        finally:
            kp.close()
        _produce(b.bootstrap, "compacted", _filler(60, "b"))  # dirty again: a new pass
        _wait_compacted(b.bootstrap, "compacted", {
            k: v for k, v in _expected(records, offsets, True).items()
            if k.startswith(b"key-")})
        scraped = scrape_samples(b.metrics_url)
        assert scraped[("broker_log_cleaner_passes_total", ())] >= 2
        assert scraped[("broker_log_cleaner_records_removed_total", ())] >= KEYS * (
            VERSIONS - 1)
        assert scraped[("broker_log_cleaner_read_bytes_total", ())] > scraped[
            ("broker_log_cleaner_written_bytes_total", ())] > 0
    passes = _cleaned_events(log_path)
    assert passes and all(e["bytes_read"] > 0 and "mb_per_s" in e for e in passes)
    assert sum(e["records_removed"] for e in passes) >= KEYS * (VERSIONS - 1)


def _job(partition_dir: Path) -> CleanJob:
    """The pass the broker would plan for the partition's closed segments."""
    paths = sorted(partition_dir.glob("*" + SUFFIX))[:-1]  # the last one is active
    segs = []
    for path in paths:
        first = None
        last = 0
        for b in cleaner.headers_of(path):
            first = b.base_offset if first is None else first
            last = b.next_offset
        segs.append(SegmentFile(int(path.stem), path, path.stat().st_size, last,
                                path.stat().st_mtime_ns // 1_000_000))
    return CleanJob(partition_dir, tuple(segs), 0, int(time.time() * 1000), 0, 86_400_000,
                    1 << 20, 1 << 24)


def test_a_kill_mid_clean_loses_nothing_at_either_point_of_a_pass(tmp_path):
    """A pass's files written but not swapped (a crash before the decision), or the swap
    decided but not done (a crash after): after kill -9 and restart each key's newest
    record is there, at its offset, and the second case's removals hold."""
    data = tmp_path / "data"
    configs = {**COMPACTED, "min.cleanable.dirty.ratio": "1.0"}  # the broker never cleans
    with EmbeddedBroker(data_dir=data, log_path=tmp_path / "b.log") as b:
        _create(b.bootstrap, "crash", configs)
        records = _workload()
        offsets = _produce(b.bootstrap, "crash", records)
        _produce(b.bootstrap, "crash", _filler(60, "a"))
        want = {k: v for k, v in _expected(records, offsets, False).items()
                if k.startswith(b"key-")}
        b.kill()
        pdir = data / "topics" / "crash" / "0"
        result = cleaner.clean(_job(pdir))
        assert result is not None and result.cleaned  # files written, nothing swapped
        b.start()
        got = _read_all(b.bootstrap, "crash")
        assert {k: (o, v) for o, k, v in got if k.startswith(b"key-")} == want
        assert len(got) > len(want) + 60  # nothing was removed: the pass never happened
        assert not list(pdir.glob("*" + cleaner.CLEANED_SUFFIX))
        b.kill()
        result = cleaner.clean(_job(pdir))
        assert result is not None
        for base, cleaned in result.cleaned.items():  # step 1 of the swap, then the kill
            cleaned.path.rename(pdir / (f"{base:020d}" + cleaned_swap.SWAP_SUFFIX))
        b.start()
        _wait_compacted(b.bootstrap, "crash", want, timeout=5)
        assert not list(pdir.glob("*" + cleaned_swap.SWAP_SUFFIX))


@pytest.mark.java
def test_the_java_consumer_reads_a_compacted_topic_back(tmp_path, java_checks):
    with EmbeddedBroker(data_dir=tmp_path / "data", log_path=tmp_path / "b.log") as b:
        _create(b.bootstrap, "jcompacted", COMPACTED)
        records = _workload()
        offsets = _produce(b.bootstrap, "jcompacted", records)
        _produce(b.bootstrap, "jcompacted", _filler(60, "a"))
        want = {k: v for k, v in _expected(records, offsets, False).items()
                if k.startswith(b"key-")}
        _wait_compacted(b.bootstrap, "jcompacted", want)
        out = run_java(java_checks, "LogKeepCheck", b.bootstrap, "read", "jcompacted")
    assert out["OFFSETS_GROW"] == "true"
    for key, (offset, value) in want.items():
        shown = "NULL" if value is None else value[:3].decode()
        assert out[f"KEY.{key.decode()}"] == f"{offset},{shown},1"


def test_a_compacted_topic_refuses_records_without_a_key(tmp_path):
    """As Kafka: INVALID_RECORD for a keyless record, compressed or not; keyed ones go in."""
    with EmbeddedBroker(data_dir=tmp_path / "data", log_path=tmp_path / "b.log") as b:
        _create(b.bootstrap, "keyed", COMPACTED)
        for codec in ("none", "gzip"):
            p = ck.Producer({"bootstrap.servers": b.bootstrap, "compression.type": codec,
                             "linger.ms": 0, "message.timeout.ms": 10000})
            errors: list = []

            def on(err, _msg, errors=errors):
                errors.append(None if err is None else err.code())

            p.produce("keyed", key=b"k", value=b"v", partition=0, on_delivery=on)
            p.flush(15)
            p.produce("keyed", key=None, value=b"v", partition=0, on_delivery=on)
            p.flush(15)
            assert errors == [None, ck.KafkaError.INVALID_RECORD], codec
        got = _read_all(b.bootstrap, "keyed")
        assert [(k, v) for _, k, v in got] == [(b"k", b"v"), (b"k", b"v")]
