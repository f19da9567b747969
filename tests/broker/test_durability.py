"""--data-dir: acknowledged records survive kill -9; a torn tail is cut off on recovery."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import confluent_kafka as ck
import pytest
from broker_helpers import batch, fetch, list_offset, produce, record_values

from appliance.broker import EmbeddedBroker, errors, schemas
from appliance.broker.wire_client import WireClient


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


def test_torn_tail_is_dropped_and_earlier_records_kept(tmp_path):
    with EmbeddedBroker(data_dir=tmp_path, extra_args=["--topics", "torn:1"]) as b:
        with WireClient(b.bootstrap) as c:
            for i in range(10):
                produce(c, "torn", 0, batch([b"r%d-a" % i, b"r%d-b" % i]))
        b.kill()
        (seg,) = _segments(tmp_path, "torn", 0)
        size = seg.stat().st_size
        with open(seg, "r+b") as f:
            f.truncate(size - 7)  # the last frame is now cut mid-batch
        b.start()
        values = _all_values(b.bootstrap, "torn", 0)
        assert values == [b"r%d-%s" % (i, x) for i in range(9) for x in (b"a", b"b")]
        with WireClient(b.bootstrap) as c:
            assert produce(c, "torn", 0, batch([b"after"]))["base_offset"] == 18
        assert seg.stat().st_size < size
        log = b.log_path.read_text()
        assert "broker.recovery_truncated" in log
        b.restart()  # the repaired log recovers cleanly, including the new record
        assert _all_values(b.bootstrap, "torn", 0)[-1] == b"after"


def test_corrupted_frame_in_the_middle_cuts_the_rest(tmp_path):
    with EmbeddedBroker(data_dir=tmp_path, extra_args=["--topics", "crc:1"]) as b:
        with WireClient(b.bootstrap) as c:
            for i in range(5):
                produce(c, "crc", 0, batch([b"%d" % i * 50]))
        b.stop()
        (seg,) = _segments(tmp_path, "crc", 0)
        data = bytearray(seg.read_bytes())
        frame = len(data) // 5
        data[frame * 3 + 40] ^= 0xFF  # flip a byte inside the 4th frame's batch
        seg.write_bytes(bytes(data))
        b.start()
        assert _all_values(b.bootstrap, "crc", 0) == [b"%d" % i * 50 for i in range(3)]


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
