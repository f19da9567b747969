"""kill -9 of the durable broker while its log cleaner compacts (issue 53, item 2): at
random moments while passes run, then a restart on the same directory. After every
restart each key's newest acknowledged record is readable exactly once among the
cleaned segments' keys, offsets only grow, and nothing acknowledged after the last
version of a key is missing. The crash points are the seed's (``FAULTS_SEED``)."""

from __future__ import annotations

import os
import time

from kafka import KafkaConsumer, TopicPartition
from kafka.record.default_records import DefaultRecordBatchBuilder

from appliance.broker import EmbeddedBroker
from appliance.broker.wire.client import WireClient
from bench._broker_load import produce

from support.faults.fault_knobs import knob

ROUNDS = knob(3, 12)
KEYS = 500
PER_BATCH = 50
VALUE = 400
CONFIGS = {"cleanup.policy": "compact", "segment.bytes": str(256 * 1024),
           "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "86400000"}


def _batch(seqs: range) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                  producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                  batch_size=1 << 30)
    now = int(time.time() * 1000)
    for i, n in enumerate(seqs):
        b.append(i, timestamp=now, key=b"k%04d" % (n % KEYS),
                 value=b"%012d" % n + os.urandom(VALUE - 12), headers=[])
    return bytes(b.build())


def _write(bootstrap: str, first: int, count: int, acked: dict[bytes, tuple[int, int]]
           ) -> None:
    """Acknowledged writes: key -> (offset, sequence) of its newest."""
    with WireClient(bootstrap, timeout=30) as c:
        for start in range(first, first + count, PER_BATCH):
            seqs = range(start, min(start + PER_BATCH, first + count))
            base = produce(c, "table", _batch(seqs))
            for i, n in enumerate(seqs):
                acked[b"k%04d" % (n % KEYS)] = (base + i, n)


def _check(bootstrap: str, acked: dict[bytes, tuple[int, int]]) -> None:
    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                      auto_offset_reset="earliest", consumer_timeout_ms=2000)
    c.assign([TopicPartition("table", 0)])
    last = -1
    newest: dict[bytes, tuple[int, int]] = {}
    for m in c:
        assert m.offset > last
        last = m.offset
        newest[m.key] = (m.offset, int(m.value[:12]))
    c.close()
    assert newest == acked  # every key's newest acknowledged record, where it was written


def test_kill_9_while_the_cleaner_runs_loses_no_keys_newest_record(tmp_path, rng):
    acked: dict[bytes, tuple[int, int]] = {}
    broker = EmbeddedBroker(data_dir=tmp_path / "data", log_path=tmp_path / "broker.log")
    broker.start()
    try:
        broker.create_topics({"table": 1}, CONFIGS)
        written = 0
        pdir = tmp_path / "data" / "topics" / "table" / "0"
        mid_pass = 0
        for _ in range(ROUNDS):
            _write(broker.bootstrap, written, 6000, acked)
            written += 6000
            time.sleep(rng.uniform(0.0, 2.5))  # passes start every second
            broker.kill()
            mid_pass += bool(list(pdir.glob("*.cleaned")) + list(pdir.glob("*.swap")))
            broker.start()
            _check(broker.bootstrap, acked)
        # and the cleaner still gets everything closed down to one record a key
        _write(broker.bootstrap, written, 2000, acked)
        deadline = time.monotonic() + 60
        while True:
            c = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                              auto_offset_reset="earliest", consumer_timeout_ms=3000)
            c.assign([TopicPartition("table", 0)])
            total = sum(1 for _ in c)
            c.close()
            if total < 4 * KEYS:  # the active segment holds at most a few hundred
                break
            assert time.monotonic() < deadline, total
            time.sleep(1)
        _check(broker.bootstrap, acked)
    finally:
        broker.stop()
    log = (tmp_path / "broker.log").read_text()
    assert '"broker.log_cleaned"' in log
    print(f"kills that left a pass's files behind: {mid_pass} of {ROUNDS}")
