"""--data-dir: acknowledged records survive kill -9; recovery quarantines bytes that are
not a valid frame (a torn tail, a damaged frame) and keeps every valid frame after them."""

from __future__ import annotations

import json
import os
import struct
import threading
import time
from pathlib import Path

import confluent_kafka as ck
import pytest

from appliance.broker import EmbeddedBroker
from appliance.broker.wire import errors, schemas
from appliance.broker.wire.client import WireClient

from support.scrape import metric
from support.wire_helpers import (
    batch,
    fetch,
    list_offset,
    produce,
    record_offsets_values,
    record_values,
)


def _all_values(bootstrap: str, topic: str, partition: int) -> list[bytes]:
    out: list[bytes] = []
    with WireClient(bootstrap) as c:
        offset = list_offset(c, topic, partition, -2)["offset"]
        end = list_offset(c, topic, partition, -1)["offset"]
        while offset < end:
            part = fetch(c, topic, partition, offset)
            assert part["error_code"] == 0
            values = record_values(part["records"])
            out.extend(values)
            offset += len(values)
    return out


def _segments(data_dir: Path, topic: str, partition: int) -> list[Path]:
    return sorted((data_dir / "topics" / topic / str(partition)).glob("*.log"))


def test_acknowledged_records_survive_kill_9_during_production(tmp_path):
    acked: list[tuple[int, bytes]] = []
    stop = threading.Event()
    with EmbeddedBroker(data_dir=tmp_path, extra_args=["--topics", "dur:1"]) as b:
        def produce_until_killed():
            with WireClient(b.bootstrap) as c:
                i = 0
                while not stop.is_set() and i < 100_000:
                    value = b"value-%06d" % i
                    try:
                        resp = produce(c, "dur", 0, batch([value]), acks=-1)
                    except OSError:
                        return  # the broker died under us: this one was never acked
                    assert resp["error_code"] == 0
                    acked.append((resp["base_offset"], value))
                    i += 1

        t = threading.Thread(target=produce_until_killed)
        t.start()
        deadline = time.monotonic() + 20
        while len(acked) < 300 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert b.kill() == -9  # SIGKILL mid-stream: no shutdown path runs
        stop.set()
        t.join(timeout=20)
        assert len(acked) >= 300
        b.start()
        values = _all_values(b.bootstrap, "dur", 0)
        for offset, value in acked:
            assert values[offset] == value
        assert len(values) - len(acked) in (0, 1)  # at most the one in flight at the kill


@pytest.mark.parametrize("flush", ["write", "fsync", "interval"])
def test_confluent_acks_all_survive_kill_and_offsets_continue(tmp_path, flush):
    args = ["--topics", "ck:2", "--flush", flush, "--flush-interval-ms", "50"]
    with EmbeddedBroker(data_dir=tmp_path, extra_args=args) as b:
        p = ck.Producer({"bootstrap.servers": b.bootstrap, "acks": "all",
                         "enable.idempotence": True, "compression.type": "gzip"})
        delivered = []
        for i in range(2000):
            p.produce("ck", value=b"%d" % i, partition=i % 2,
                      on_delivery=lambda err, m: delivered.append((err, m.partition(),
                                                                   m.offset())))
        assert p.flush(20) == 0
        assert all(err is None for err, _, _ in delivered) and len(delivered) == 2000
        b.kill()
        b.start()
        for part in (0, 1):
            assert _all_values(b.bootstrap, "ck", part) == [b"%d" % i for i in
                                                           range(part, 2000, 2)]
        with WireClient(b.bootstrap) as c:
            assert produce(c, "ck", 0, batch([b"next"]))["base_offset"] == 1000


def _all_records(bootstrap: str, topic: str, partition: int) -> dict[int, bytes]:
    """offset -> value of every record stored, gaps (offsets lost to damage) included."""
    out: dict[int, bytes] = {}
    with WireClient(bootstrap) as c:
        offset = list_offset(c, topic, partition, -2)["offset"]
        end = list_offset(c, topic, partition, -1)["offset"]
        while offset < end:
            part = fetch(c, topic, partition, offset)
            assert part["error_code"] == 0
            pairs = [(o, v) for o, v in record_offsets_values(part["records"]) if o >= offset]
            assert pairs, f"no records at or after offset {offset} below the end {end}"
            out.update(pairs)
            offset = pairs[-1][0] + 1
    return out


def _frames(segment: Path) -> list[tuple[int, int]]:
    """(start, end) byte range of each record batch in a segment (Kafka's layout: batches
    back to back, each ``[i64 baseOffset][i32 batchLength][...]``)."""
    data = segment.read_bytes()
    out, pos = [], 0
    while pos < len(data):
        (length,) = struct.unpack_from(">i", data, pos + 8)
        out.append((pos, pos + 12 + length))
        pos += 12 + length
    return out


def _events(log_path: Path, name: str) -> list[dict]:
    out = []
    for line in log_path.read_text().splitlines():
        if line.startswith("{") and f'"{name}"' in line:
            out.append(json.loads(line))
    return [e for e in out if e.get("event") == name]



def test_torn_tail_is_quarantined_and_earlier_records_kept(tmp_path):
    with EmbeddedBroker(data_dir=tmp_path, extra_args=["--topics", "torn:1"]) as b:
        with WireClient(b.bootstrap) as c:
            for i in range(10):
                produce(c, "torn", 0, batch([b"r%d-a" % i, b"r%d-b" % i]))
        b.kill()
        (seg,) = _segments(tmp_path, "torn", 0)
        data = seg.read_bytes()
        last_start = _frames(seg)[-1][0]
        with open(seg, "r+b") as f:
            f.truncate(len(data) - 7)  # the last frame is now cut mid-batch
        b.start()
        values = _all_values(b.bootstrap, "torn", 0)
        assert values == [b"r%d-%s" % (i, x) for i in range(9) for x in (b"a", b"b")]
        assert seg.stat().st_size == last_start  # the torn tail is cut off once copied
        with WireClient(b.bootstrap) as c:
            assert produce(c, "torn", 0, batch([b"after"]))["base_offset"] == 18
        (event,) = _events(b.log_path, "broker.recovery_quarantined")
        assert (event["at_byte"], event["bytes"]) == (last_start, len(data) - 7 - last_start)
        assert event["at_end"] is True and event["valid_frames_after"] == 0
        # the torn bytes are kept aside, not destroyed
        assert Path(event["quarantine_file"]).read_bytes() == data[last_start:len(data) - 7]
        b.restart()  # the repaired log recovers cleanly, including the new record
        assert _all_values(b.bootstrap, "torn", 0)[-1] == b"after"
        assert len(_events(b.log_path, "broker.recovery_quarantined")) == 1


def test_damaged_frame_is_quarantined_and_every_frame_after_it_kept(tmp_path):
    """A flipped byte in one batch of the first segment, found by a --full-recovery start
    (a normal start takes that segment from its index): the batch's bytes go to a
    quarantine file, and every valid batch after it, in the same segment and in the later
    ones, comes back at its own offset (only the damaged batch's offset is missing); later
    starts, full or not, skip the region."""
    values = [b"%d" % i * 50 for i in range(8)]
    args = ["--topics", "crc:1", "--segment-bytes", "400", "--metrics-port", "0"]
    with EmbeddedBroker(data_dir=tmp_path, extra_args=args) as b:
        with WireClient(b.bootstrap) as c:
            for v in values:
                produce(c, "crc", 0, batch([v]))
        b.stop()
        first, *later = _segments(tmp_path, "crc", 0)
        assert later, "the records span several segments"
        frames = _frames(first)
        assert len(frames) >= 3
        start, end = frames[1]
        data = bytearray(first.read_bytes())
        data[start + 40] ^= 0xFF  # inside the second batch, under its CRC
        first.write_bytes(bytes(data))
        b.extra_args.append("--full-recovery")
        b.start()
        assert _all_records(b.bootstrap, "crc", 0) == {
            i: v for i, v in enumerate(values) if i != 1}
        (event,) = _events(b.log_path, "broker.recovery_quarantined")
        assert (event["at_byte"], event["bytes"]) == (start, end - start)
        assert event["valid_frames_after"] == len(frames) - 2 and event["at_end"] is False
        assert Path(event["quarantine_file"]).read_bytes() == bytes(data[start:end])
        assert metric(b.metrics_url, "broker_recovery_quarantined_bytes_total") == end - start
        assert metric(b.metrics_url, "broker_recovery_quarantined_regions_total") == 1
        with WireClient(b.bootstrap) as c:
            assert produce(c, "crc", 0, batch([b"next"]))["base_offset"] == len(values)
        copied = Path(event["quarantine_file"]).stat().st_mtime_ns
        b.restart()  # the region is skipped again, its copy kept as it was
        assert _all_records(b.bootstrap, "crc", 0) == {
            **{i: v for i, v in enumerate(values) if i != 1}, len(values): b"next"}
        _first, again = _events(b.log_path, "broker.recovery_quarantined")
        assert again["quarantine_file"] == event["quarantine_file"]
        assert Path(event["quarantine_file"]).stat().st_mtime_ns == copied
        b.extra_args.remove("--full-recovery")
        b.restart()  # from the index: the region is still skipped (``<base>.bad``)
        assert _all_records(b.bootstrap, "crc", 0) == {
            **{i: v for i, v in enumerate(values) if i != 1}, len(values): b"next"}
        assert len(_events(b.log_path, "broker.recovery_quarantined")) == 2


def test_recovery_reads_indexes_not_records(tmp_path):
    """After a clean stop no batch is read through at start; after kill -9 only the
    segments a crash may have left unsynced (the active one, maybe the one before), not
    the closed ones below the recovery point."""
    args = ["--topics", "idx:1", "--segment-bytes", "20000"]
    with EmbeddedBroker(data_dir=tmp_path, extra_args=args) as b:
        with WireClient(b.bootstrap) as c:
            for i in range(400):
                produce(c, "idx", 0, batch([b"%05d" % i * 40]))
        b.stop()
        assert len(_segments(tmp_path, "idx", 0)) >= 5
        b.start()
        (event,) = _events(b.log_path, "broker.topic_recovered")
        assert event["batches_read"] == 0 and event["high_watermarks"] == [400]
        with WireClient(b.bootstrap) as c:
            produce(c, "idx", 0, batch([b"after"]))
        time.sleep(0.5)  # the rolled segments' background flush
        b.kill()
        b.start()
        last = _events(b.log_path, "broker.topic_recovered")[-1]
        per_segment = 20000 // 260 + 1
        assert 0 < last["batches_read"] <= 2 * per_segment
        assert last["high_watermarks"] == [401]
        assert _all_values(b.bootstrap, "idx", 0)[-1] == b"after"


def test_topics_partitions_deletes_and_producer_state_persist(tmp_path):
    with EmbeddedBroker(data_dir=tmp_path) as b:
        b.create_topics({"keep": 1, "gone": 1})
        with WireClient(b.bootstrap) as c:
            c.request(schemas.CREATE_PARTITIONS, 1, {
                "topics": [{"name": "keep", "count": 3, "assignments": None}],
                "timeout_ms": 1000, "validate_only": False})
            c.request(schemas.DELETE_TOPICS, 3, {"topic_names": ["gone"], "timeout_ms": 1000})
            pid_resp = c.request(schemas.INIT_PRODUCER_ID, 1, {"transactional_id": None,
                                                               "transaction_timeout_ms": 1})
            pid = pid_resp["producer_id"]
            idem = batch([b"once"], pid, 0, 0)
            assert produce(c, "keep", 2, idem)["base_offset"] == 0
            commit = c.request(schemas.OFFSET_COMMIT, 2, {
                "group_id": "g", "generation_id": -1, "member_id": "", "retention_time_ms": -1,
                "topics": [{"name": "keep", "partitions": [
                    {"partition_index": 2, "committed_offset": 1, "committed_metadata": ""}]}]})
            assert commit["topics"][0]["partitions"][0]["error_code"] == 0
        b.kill()
        b.start()
        with WireClient(b.bootstrap) as c:
            meta = c.request(schemas.METADATA, 9, {"topics": None,
                                                   "allow_auto_topic_creation": False})
            topics = {t["name"]: len(t["partitions"]) for t in meta["topics"]}
            assert topics == {"keep": 3}
            # the retried batch is still recognised after the restart
            again = produce(c, "keep", 2, idem)
            assert (again["error_code"], again["base_offset"]) == (0, 0)
            assert list_offset(c, "keep", 2, -1)["offset"] == 1
            # committed consumer offsets survive too
            resp = c.request(schemas.OFFSET_FETCH, 5, {
                "group_id": "g", "topics": [{"name": "keep", "partition_indexes": [2]}]})
            assert resp["topics"][0]["partitions"][0]["committed_offset"] == 1
            # and a new producer never reuses the recovered producer id
            fresh = c.request(schemas.INIT_PRODUCER_ID, 1, {"transactional_id": None,
                                                            "transaction_timeout_ms": 1})
            assert fresh["producer_id"] > pid


def test_segments_roll_and_retention_deletes_old_files(tmp_path):
    args = ["--topics", "roll:1", "--segment-bytes", "2000", "--retention-bytes", "5000",
            "--flush", "fsync"]
    with EmbeddedBroker(data_dir=tmp_path, extra_args=args) as b:
        with WireClient(b.bootstrap) as c:
            for i in range(30):
                produce(c, "roll", 0, batch([bytes([65 + i % 26]) * 900]))
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and list_offset(c, "roll", 0, -2)["offset"] <= 20:
                time.sleep(0.1)  # the retention sweep runs every second
            start = list_offset(c, "roll", 0, -2)["offset"]
        assert start > 20
        files = _segments(tmp_path, "roll", 0)
        assert 1 < len(files) < 10
        b.restart()
        with WireClient(b.bootstrap) as c:
            # the checkpointed log start: expired batches in kept files stay expired
            assert list_offset(c, "roll", 0, -2)["offset"] >= start
            assert list_offset(c, "roll", 0, -1)["offset"] == 30
            assert fetch(c, "roll", 0, start - 1)["error_code"] == errors.OFFSET_OUT_OF_RANGE
            assert record_values(fetch(c, "roll", 0, 29)["records"]) == [bytes([65 + 29 % 26])
                                                                        * 900]


def test_fully_expired_partition_keeps_its_offsets_after_restart(tmp_path):
    args = ["--topics", "exp:1", "--retention-ms", "100"]
    with EmbeddedBroker(data_dir=tmp_path, extra_args=args) as b:
        with WireClient(b.bootstrap) as c:
            for i in range(5):
                produce(c, "exp", 0, batch([b"%d" % i]))
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and list_offset(c, "exp", 0, -2)["offset"] < 5:
                time.sleep(0.1)
            assert list_offset(c, "exp", 0, -2)["offset"] == 5
        b.kill()
        b.start()
        with WireClient(b.bootstrap) as c:
            assert list_offset(c, "exp", 0, -2)["offset"] == 5
            assert list_offset(c, "exp", 0, -1)["offset"] == 5
            assert produce(c, "exp", 0, batch([b"new"]))["base_offset"] == 5


def test_time_retention_after_restart_counts_from_when_data_was_written(tmp_path):
    args = ["--topics", "old:1", "--retention-ms", "600000"]  # ten minutes
    with EmbeddedBroker(data_dir=tmp_path, extra_args=args) as b:
        with WireClient(b.bootstrap) as c:
            produce(c, "old", 0, batch([b"written an hour ago"]))
        b.stop()
        (seg,) = _segments(tmp_path, "old", 0)
        hour_ago = time.time() - 3600
        os.utime(seg, (hour_ago, hour_ago))
        b.start()
        with WireClient(b.bootstrap) as c:
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and list_offset(c, "old", 0, -2)["offset"] == 0:
                time.sleep(0.1)
            assert list_offset(c, "old", 0, -2)["offset"] == 1  # expired, not kept 10 more min
