"""The broker's data directory fails under it; produces are refused, never half-kept.

- Disk full mid-stream (a 12 MiB tmpfs this test mounts; needs root, as CI is), 8 KB
  records, acks=all: produces are refused with the retriable KAFKA_STORAGE_ERROR while the
  broker keeps serving; once space is freed produces are acknowledged again at the very
  next offsets (a librdkafka producer that was retrying through the outage delivers too).
- I/O errors (an LD_PRELOAD library, ``io_error_shim.c``, fails segment writes after
  writing half, or fails their fsync): the same refusal and the same recovery. The same
  torn write under the committed-offsets log: the commit is refused (retriable) and cut
  back, so the commits after it survive a restart.

After kill -9 and a restart on the same directory, every acknowledged record reads back
byte-identical at its acknowledged offset, nothing that was refused appears, and recovery
finds nothing to quarantine (no torn frame was left behind).
"""

from __future__ import annotations

import random
import urllib.request
from pathlib import Path

import confluent_kafka as ck
import pytest

from appliance.broker import EmbeddedBroker
from appliance.broker.wire import errors, schemas
from appliance.broker.wire.client import WireClient

from support.faults.preload import build_library
from support.scrape import metric_sum
from support.wire_helpers import produce_one, read_partition

TOPIC = "full"
PARTITIONS = 2
RECORD = 8 * 1024
BALLAST = 2 * 1024 * 1024  # what "the operator" deletes to free space


@pytest.fixture
def small_disk(tmpfs):
    return tmpfs("12m")


def _value(rng: random.Random, n: int) -> bytes:
    return b"%08d:" % n + rng.randbytes(RECORD - 9)


@pytest.mark.parametrize("flush", ["write", "fsync"])
def test_full_data_dir_refuses_then_recovers_and_keeps_every_acknowledged_record(
        small_disk, tmp_path, flush):
    rng = random.Random(31)
    (small_disk / "ballast").write_bytes(b"\0" * BALLAST)
    data_dir = small_disk / "broker"
    acked: dict[tuple[int, int], bytes] = {}  # (partition, offset) -> value
    # a log budget far beyond the disk: this test is about the disk filling up (the
    # default budget, sized to the disk, would delete old segments before it did)
    args = ["--topics", f"{TOPIC}:{PARTITIONS}", "--flush", flush,
            "--segment-bytes", str(1024 * 1024), "--metrics-port", "0",
            "--retention-total-bytes", str(1 << 40)]
    b = EmbeddedBroker(data_dir=data_dir, extra_args=args, log_path=tmp_path / "broker.log")
    b.start()
    try:
        with WireClient(b.bootstrap) as c:
            # 1. Fill the disk: acknowledged until the data directory refuses.
            refused = n = 0
            for n in range(2000):  # 16 MB of records: more than the disk holds
                p = n % PARTITIONS
                value = _value(rng, n)
                code, offset = produce_one(c, TOPIC, p, value)
                if code == errors.NONE:
                    assert (p, offset) not in acked
                    acked[(p, offset)] = value
                    refused = 0
                else:
                    assert code == errors.KAFKA_STORAGE_ERROR, code
                    refused += 1
                    if refused >= 20:
                        break
            assert refused >= 20, "the disk never filled"
            before_full = len(acked)
            assert before_full > 500  # ~10 MiB of 8 KB records went in first
            # still serving while full: reads work, produces keep being refused
            for p in range(PARTITIONS):
                stored = read_partition(b.bootstrap, TOPIC, p)
                assert stored == {o: v for (q, o), v in acked.items() if q == p}
            assert produce_one(c, TOPIC, 0, _value(rng, n))[0] == errors.KAFKA_STORAGE_ERROR
            assert metric_sum(b.metrics_url, "broker_storage_append_errors_total") >= 20

            # 2. A real client produces through the outage: librdkafka retries the
            # retriable error and must deliver once space returns.
            delivered: list[tuple[object, int, int, bytes]] = []
            producer = ck.Producer({"bootstrap.servers": b.bootstrap, "acks": "all",
                                    "enable.idempotence": True, "message.timeout.ms": 120000,
                                    "retry.backoff.ms": 200, "linger.ms": 0})
            for i in range(20):
                producer.produce(TOPIC, value=_value(rng, 10_000 + i), partition=i % 2,
                                 on_delivery=lambda err, m: delivered.append(
                                     (err, m.partition(), m.offset(), m.value())))
            producer.poll(2.0)
            assert delivered == []  # nothing acknowledged while the disk is full

            # 3. Space returns: produces are acknowledged again, at the next offsets.
            (small_disk / "ballast").unlink()
            assert producer.flush(60) == 0
            assert len(delivered) == 20 and all(err is None for err, *_ in delivered)
            for _err, p, offset, value in delivered:
                acked[(p, offset)] = value
            ends = {p: max(o for (q, o) in acked if q == p) + 1 for p in range(PARTITIONS)}
            for i in range(100):
                p = i % PARTITIONS
                value = _value(rng, 20_000 + i)
                code, offset = produce_one(c, TOPIC, p, value)
                assert code == errors.NONE
                assert offset == ends[p]  # no offset was burnt by the refused produces
                ends[p] += 1
                acked[(p, offset)] = value
        print(f"disk full ({flush}): {before_full} acknowledged before the disk filled, "
              f"{len(acked) - before_full} after space was freed")

        # 4. Crash and restart on the same directory.
        assert b.kill() == -9
        b.start()
        for p in range(PARTITIONS):
            stored = read_partition(b.bootstrap, TOPIC, p)
            expected = {o: v for (q, o), v in acked.items() if q == p}
            missing = sorted(set(expected) - set(stored))
            assert missing == [], f"partition {p}: acknowledged offsets lost: {missing[:20]}"
            wrong = [o for o in expected if stored[o] != expected[o]]
            assert wrong == [], f"partition {p}: offsets read back different: {wrong[:20]}"
            assert set(stored) == set(expected), "a refused record was stored"
        assert "broker.recovery_quarantined" not in b.log_path.read_text()
    finally:
        b.stop()


@pytest.fixture(scope="module")
def io_error_shim(tmp_path_factory) -> Path:
    return build_library(Path(__file__).resolve().parent / "io_error_shim.c",
                         tmp_path_factory.mktemp("io-error-shim"))


def _errno_count(url: str, errno_name: str) -> float:
    sample = f'broker_storage_append_errors_total{{errno="{errno_name}"}} '
    for line in urllib.request.urlopen(url, timeout=10).read().decode().splitlines():
        if line.startswith(sample):
            return float(line.split()[-1])
    return 0.0


@pytest.mark.parametrize("fault", ["write", "sync"])
def test_io_errors_are_undone_refused_and_recovered_from(tmp_path, io_error_shim, fault):
    rng = random.Random(56)
    trigger = tmp_path / "fail-now"
    acked: dict[int, bytes] = {}
    args = ["--topics", "eio:1", "--flush", "fsync", "--metrics-port", "0"]
    b = EmbeddedBroker(data_dir=tmp_path / "data", extra_args=args,
                       log_path=tmp_path / "broker.log",
                       extra_env={"LD_PRELOAD": str(io_error_shim),
                                  "IO_ERROR_TRIGGER": str(trigger)})
    b.start()
    try:
        with WireClient(b.bootstrap) as c:
            for i in range(20):
                value = _value(rng, i)
                code, offset = produce_one(c, "eio", 0, value)
                assert code == errors.NONE
                acked[offset] = value
            trigger.write_text(fault)
            for i in range(5):
                assert produce_one(c, "eio", 0, _value(rng, 100 + i))[0] == \
                    errors.KAFKA_STORAGE_ERROR
            assert _errno_count(b.metrics_url, "EIO") == 5
            assert read_partition(b.bootstrap, "eio", 0) == acked  # nothing half-kept
            trigger.unlink()
            for i in range(20):
                value = _value(rng, 200 + i)
                code, offset = produce_one(c, "eio", 0, value)
                assert (code, offset) == (errors.NONE, 20 + i)
                acked[offset] = value
        assert b.kill() == -9
        b.extra_env = {}  # the disk is healthy again
        b.start()
        assert read_partition(b.bootstrap, "eio", 0) == acked
        log = b.log_path.read_text()
        assert "broker.append_failed" in log and "broker.append_recovered" in log
        assert "broker.recovery_quarantined" not in log
    finally:
        b.stop()


def _commit(c: WireClient, group: str, offset: int) -> int:
    return c.request(schemas.OFFSET_COMMIT, 8, {
        "group_id": group, "generation_id": -1, "member_id": "", "group_instance_id": None,
        "topics": [{"name": "eio", "partitions": [{
            "partition_index": 0, "committed_offset": offset, "committed_leader_epoch": -1,
            "committed_metadata": None}]}]})["topics"][0]["partitions"][0]["error_code"]


def _committed(c: WireClient, group: str) -> int:
    return c.request(schemas.OFFSET_FETCH, 5, {
        "group_id": group, "topics": [{"name": "eio", "partition_indexes": [0]}]})[
        "topics"][0]["partitions"][0]["committed_offset"]


def test_a_torn_write_of_the_offsets_log_is_undone(tmp_path, io_error_shim):
    """A commit whose write tears is refused (COORDINATOR_NOT_AVAILABLE: clients retry)
    and cut back; commits after it are kept across kill -9 and a restart, and recovery
    finds no torn line to skip."""
    trigger = tmp_path / "fail-now"
    b = EmbeddedBroker(data_dir=tmp_path / "data", extra_args=["--topics", "eio:1"],
                       log_path=tmp_path / "broker.log",
                       extra_env={"LD_PRELOAD": str(io_error_shim),
                                  "IO_ERROR_TRIGGER": str(trigger)})
    b.start()
    try:
        with WireClient(b.bootstrap) as c:
            assert _commit(c, "before", 1) == errors.NONE
            trigger.write_text("write")
            assert _commit(c, "torn", 2) == errors.COORDINATOR_NOT_AVAILABLE
            trigger.unlink()
            assert _commit(c, "after", 3) == errors.NONE
            assert _committed(c, "torn") == -1
        assert b.kill() == -9
        b.extra_env = {}
        b.start()
        with WireClient(b.bootstrap) as c:
            assert [_committed(c, g) for g in ("before", "torn", "after")] == [1, -1, 3]
        log = b.log_path.read_text()
        assert "broker.offsets_write_failed" in log
        assert "broker.offsets_log_skipped" not in log
    finally:
        b.stop()
