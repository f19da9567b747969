"""Transactions under kill -9: a librdkafka transactional producer commits and aborts in a
loop while the broker is killed twice and restarted; an exact checker then reads
``read_committed``: every transaction whose commit was acknowledged is visible once and
whole, no aborted one is visible at all, and one whose outcome the producer never learned
(the kill came mid-commit) is either whole or absent."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter

import confluent_kafka as ck

from appliance.broker import EmbeddedBroker

TOPIC = "txk"
PARTITIONS = 2
RECORDS_PER_TXN = 6


def _producer(bootstrap: str) -> ck.Producer:
    p = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": "nemesis",
                     "transaction.timeout.ms": 5000, "linger.ms": 2,
                     "message.timeout.ms": 5000})
    p.init_transactions(10)
    return p


def _run_transactions(b: EmbeddedBroker, stop: threading.Event,
                      outcome: dict[int, str]) -> None:
    rng = random.Random(7)
    txn = 0
    producer = None
    while not stop.is_set():
        try:
            if producer is None:
                producer = _producer(b.bootstrap)
            txn += 1
            commit = rng.random() < 0.7
            outcome[txn] = "unknown"
            producer.begin_transaction()
            for i in range(RECORDS_PER_TXN):
                producer.produce(TOPIC, value=b"%d-%d" % (txn, i), partition=i % PARTITIONS)
            if commit:
                producer.commit_transaction(10)
                outcome[txn] = "committed"
            else:
                producer.abort_transaction(10)
                outcome[txn] = "aborted"
        except ck.KafkaException:
            producer = None  # fenced, fatal or cut off: a new producer of the id carries on
            time.sleep(0.2)


def _read_committed(bootstrap: str) -> list[bytes]:
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "checker",
                     "isolation.level": "read_committed", "enable.auto.commit": False,
                     "enable.partition.eof": True})
    c.assign([ck.TopicPartition(TOPIC, p, ck.OFFSET_BEGINNING) for p in range(PARTITIONS)])
    out: list[bytes] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + 60
    try:
        while len(at_end) < PARTITIONS and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error():
                assert m.error().code() == ck.KafkaError._PARTITION_EOF, m.error()
                at_end.add(m.partition())
                continue
            at_end.discard(m.partition())
            out.append(m.value())
    finally:
        c.close()
    assert len(at_end) == PARTITIONS, "read_committed never reached the end"
    return out


def test_committed_exactly_once_aborted_never_across_kill_9(tmp_path):
    outcome: dict[int, str] = {}
    stop = threading.Event()
    with EmbeddedBroker(data_dir=tmp_path, log_path=tmp_path / "broker.log",
                        extra_args=["--topics", f"{TOPIC}:{PARTITIONS}"]) as b:
        worker = threading.Thread(target=_run_transactions, args=(b, stop, outcome))
        worker.start()
        try:
            for _ in range(2):
                time.sleep(2.0)
                assert b.kill() == -9
                time.sleep(0.3)
                b.start()
            time.sleep(3.0)
        finally:
            stop.set()
            worker.join(timeout=60)
        # an open transaction left by the last kill is aborted at its timeout (5 s)
        time.sleep(6.5)
        seen = Counter(_read_committed(b.bootstrap))
    by_txn: dict[int, list[int]] = {}
    for value, count in seen.items():
        assert count == 1, f"{value!r} seen {count} times"
        txn, i = map(int, value.split(b"-"))
        by_txn.setdefault(txn, []).append(i)
    committed = [t for t, o in outcome.items() if o == "committed"]
    aborted = [t for t, o in outcome.items() if o == "aborted"]
    assert len(committed) >= 10 and aborted
    for t in committed:
        assert sorted(by_txn.get(t, [])) == list(range(RECORDS_PER_TXN)), f"txn {t}"
    for t in aborted:
        assert t not in by_txn, f"aborted txn {t} visible"
    for t, parts in by_txn.items():
        assert outcome.get(t) in ("committed", "unknown"), f"txn {t}: {outcome.get(t)}"
        assert sorted(parts) == list(range(RECORDS_PER_TXN)), f"txn {t} partly visible"
