"""Transactions (KIP-98, KIP-447) with real clients: librdkafka's transactional producer
and read_committed consumers, consume-transform-produce with offsets in the transaction,
fencing by a second producer of the same transactional id, a transaction timing out, and
an open transaction across a kill -9 of the broker."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition
from kafka.record.default_records import DefaultRecordBatchBuilder

from appliance.broker import EmbeddedBroker
from appliance.broker.acl import needs
from appliance.broker.wire import errors, schemas
from appliance.broker.wire.client import WireClient

from support.broker.txn_producers import txn_producer, unique_name
from support.wire_helpers import batch, fetch_body, produce_body, record_values


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    data = tmp_path_factory.mktemp("txn")
    with EmbeddedBroker(data_dir=data, log_path=data / "broker.log") as b:
        yield b


@pytest.fixture(scope="module")
def memory_broker(tmp_path_factory):
    """Without --data-dir: the log and the transactions in memory."""
    with EmbeddedBroker(log_path=tmp_path_factory.mktemp("txn-mem") / "broker.log") as b:
        yield b


def _values(bootstrap: str, topic: str, isolation: str, expect: int | None = None,
            wait_s: float = 10.0, partitions: int = 1) -> list[bytes]:
    """Every value a consumer with this isolation level reads from the partitions' start:
    ``expect`` values, or (None) all up to where it reaches the end of every partition."""
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": unique_name("g"),
                     "isolation.level": isolation, "enable.auto.commit": False,
                     "enable.partition.eof": True})
    c.assign([ck.TopicPartition(topic, i, ck.OFFSET_BEGINNING) for i in range(partitions)])
    out: list[bytes] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + wait_s
    try:
        while time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error():
                if m.error().code() != ck.KafkaError._PARTITION_EOF:
                    raise ck.KafkaException(m.error())
                at_end.add(m.partition())
                done = len(out) >= expect if expect is not None else (
                    len(at_end) == partitions)
                if done:
                    break
                continue
            at_end.discard(m.partition())
            out.append(m.value())
    finally:
        c.close()
    return out


def test_commit_and_abort_seen_by_read_committed_and_uncommitted(broker):
    topic = unique_name("tx")
    broker.create_topics({topic: 1})
    p = txn_producer(broker.bootstrap, unique_name("tid"))
    p.begin_transaction()
    for i in range(5):
        p.produce(topic, value=b"c1-%d" % i)
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(5):
        p.produce(topic, value=b"ab-%d" % i)
    p.flush(10)
    p.abort_transaction(30)
    p.begin_transaction()
    for i in range(3):
        p.produce(topic, value=b"c2-%d" % i)
    p.commit_transaction(30)
    committed = [b"c1-%d" % i for i in range(5)] + [b"c2-%d" % i for i in range(3)]
    assert _values(broker.bootstrap, topic, "read_committed", expect=8) == committed
    everything = _values(broker.bootstrap, topic, "read_uncommitted", expect=13)
    assert everything == ([b"c1-%d" % i for i in range(5)] + [b"ab-%d" % i for i in range(5)]
                          + [b"c2-%d" % i for i in range(3)])


@pytest.mark.parametrize("store", ["segments", "memory"])
def test_read_committed_stops_at_an_open_transaction(request, store):
    broker = request.getfixturevalue("broker" if store == "segments" else "memory_broker")
    topic = unique_name("open")
    broker.create_topics({topic: 1})
    plain = ck.Producer({"bootstrap.servers": broker.bootstrap})
    plain.produce(topic, value=b"before")
    plain.flush(10)
    p = txn_producer(broker.bootstrap, unique_name("tid"))
    p.begin_transaction()
    p.produce(topic, value=b"in-txn")
    p.flush(10)
    for i in range(50):  # behind the open transaction: not stable yet
        plain.produce(topic, value=b"after-%d" % i)
    plain.flush(10)
    assert _values(broker.bootstrap, topic, "read_committed", wait_s=3) == [b"before"]
    after = [b"after-%d" % i for i in range(50)]
    assert _values(broker.bootstrap, topic, "read_uncommitted", expect=52) == [
        b"before", b"in-txn", *after]
    p.commit_transaction(30)
    assert _values(broker.bootstrap, topic, "read_committed", expect=52) == [
        b"before", b"in-txn", *after]


def test_a_second_producer_with_the_same_id_fences_the_first(broker):
    topic = unique_name("fence")
    broker.create_topics({topic: 1})
    txn_id = unique_name("tid")
    first = txn_producer(broker.bootstrap, txn_id)
    first.begin_transaction()
    first.produce(topic, value=b"zombie")
    first.flush(10)
    second = txn_producer(broker.bootstrap, txn_id)  # aborts the first one's transaction
    second.begin_transaction()
    second.produce(topic, value=b"live")
    second.commit_transaction(30)
    with pytest.raises(ck.KafkaException) as info:
        first.produce(topic, value=b"zombie-2")
        first.commit_transaction(10)
    err = info.value.args[0]
    assert err.fatal() and err.code() in (ck.KafkaError._FENCED,
                                          ck.KafkaError.PRODUCER_FENCED,
                                          ck.KafkaError.INVALID_PRODUCER_EPOCH)
    assert _values(broker.bootstrap, topic, "read_committed", expect=1) == [b"live"]


def test_offsets_sent_to_a_transaction_commit_only_with_it(broker):
    src, dst = unique_name("src"), unique_name("dst")
    broker.create_topics({src: 1, dst: 1})
    group = unique_name("ctp")
    plain = ck.Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(10):
        plain.produce(src, value=b"in-%d" % i)
    plain.flush(10)
    consumer = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                            "auto.offset.reset": "earliest", "enable.auto.commit": False,
                            "isolation.level": "read_committed"})
    consumer.subscribe([src])
    got = []
    deadline = time.monotonic() + 20
    while len(got) < 10 and time.monotonic() < deadline:
        m = consumer.poll(0.5)
        if m is not None and not m.error():
            got.append(m)
    assert len(got) == 10
    p = txn_producer(broker.bootstrap, unique_name("tid"))

    def transform(batch, commit: bool) -> None:
        p.begin_transaction()
        for m in batch:
            p.produce(dst, value=m.value().upper())
        p.send_offsets_to_transaction(
            [ck.TopicPartition(src, 0, batch[-1].offset() + 1)],
            consumer.consumer_group_metadata(), 10)
        if commit:
            p.commit_transaction(30)
        else:
            p.abort_transaction(30)

    transform(got[:4], commit=True)
    transform(got[4:], commit=False)  # neither the output nor the offset stays
    committed = consumer.committed([ck.TopicPartition(src, 0)], 10)[0].offset
    consumer.close()
    assert committed == 4
    assert _values(broker.bootstrap, dst, "read_committed", expect=4) == [
        b"IN-%d" % i for i in range(4)]


def test_a_transaction_past_its_timeout_is_aborted(broker):
    topic = unique_name("timeout")
    broker.create_topics({topic: 1})
    p = txn_producer(broker.bootstrap, unique_name("tid"), **{"transaction.timeout.ms": 1000})
    p.begin_transaction()
    p.produce(topic, value=b"forgotten")
    p.flush(10)
    time.sleep(2.5)  # the broker aborts it; read_committed moves past it
    plain = ck.Producer({"bootstrap.servers": broker.bootstrap})
    plain.produce(topic, value=b"later")
    plain.flush(10)
    assert _values(broker.bootstrap, topic, "read_committed", expect=1) == [b"later"]


def test_an_open_transaction_across_kill_9_is_aborted_at_its_timeout(tmp_path):
    with EmbeddedBroker(data_dir=tmp_path, log_path=tmp_path / "broker.log") as b:
        b.create_topics({"k9": 2})
        p = txn_producer(b.bootstrap, "k9-tid", **{"transaction.timeout.ms": 4000})
        p.begin_transaction()
        for i in range(4):
            p.produce("k9", value=b"committed-%d" % i, partition=i % 2)
        p.commit_transaction(30)
        p.begin_transaction()
        for i in range(4):
            p.produce("k9", value=b"open-%d" % i, partition=i % 2)
        p.flush(10)
        assert b.kill() == -9
        del p
        b.start()
        plain = ck.Producer({"bootstrap.servers": b.bootstrap})
        for i in range(2):
            plain.produce("k9", value=b"after-%d" % i, partition=i)
        plain.flush(10)
        started = time.monotonic()
        seen = _values(b.bootstrap, "k9", "read_committed", expect=6, wait_s=20,
                       partitions=2)
        assert sorted(seen) == sorted([b"committed-%d" % i for i in range(4)]
                                      + [b"after-0", b"after-1"])
        assert time.monotonic() - started < 15
        # a new producer of the id carries on at once
        again = txn_producer(b.bootstrap, "k9-tid")
        again.begin_transaction()
        again.produce("k9", value=b"next", partition=0)
        again.commit_transaction(30)
        seen = _values(b.bootstrap, "k9", "read_committed", expect=7, partitions=2)
        assert b"next" in seen and not any(v.startswith(b"open-") for v in seen)


def test_kafka_python_transactional_producer(broker):
    topic = unique_name("kp")
    broker.create_topics({topic: 1})
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=unique_name("kp"))
    try:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic, b"kept", partition=0)
        producer.commit_transaction()
        producer.begin_transaction()
        producer.send(topic, b"dropped", partition=0)
        producer.flush()
        producer.abort_transaction()
    finally:
        producer.close(timeout=5)
    assert _values(broker.bootstrap, topic, "read_committed", expect=1) == [b"kept"]
    assert _values(broker.bootstrap, topic, "read_uncommitted", expect=2) == [
        b"kept", b"dropped"]
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap,
                             isolation_level="read_committed", enable_auto_commit=False,
                             auto_offset_reset="earliest", consumer_timeout_ms=3000)
    try:
        consumer.assign([KpTopicPartition(topic, 0)])
        assert [m.value for m in consumer] == [b"kept"]  # kafka-python drops the aborted
    finally:
        consumer.close()


def test_transactional_ids_are_authorized_as_kafka_does(tmp_path):
    """WRITE on the transactional id (which implies DESCRIBE) for InitProducerId,
    FindCoordinator, AddPartitionsToTxn and a produce naming it; the topic needs WRITE."""
    data = tmp_path / "acl"
    data.mkdir()
    for args in (["--operation", "WRITE", "--transactional-id", "ok-",
                  "--resource-pattern-type", "prefixed"],
                 ["--operation", "WRITE", "--topic", "t"]):
        done = subprocess.run([sys.executable, "-m", "appliance", "broker-user", "acl", "add",
                               "--allow-principal", "User:ANONYMOUS", *args,
                               "--data-dir", str(data)], capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 0, done.stderr
    with EmbeddedBroker(data_dir=data, log_path=tmp_path / "b.log", extra_args=[
            "--topics", "t:1,u:1", "--authorizer", "acl"]) as b, WireClient(b.bootstrap) as c:
        found = c.request(schemas.FIND_COORDINATOR, 4, {"key_type": 1,
                                                        "coordinator_keys": ["ok-1", "no-1"]})
        assert [x["error_code"] for x in found["coordinators"]] == [0, needs.TXN_DENIED]

        def init(txn_id):
            return c.request(schemas.INIT_PRODUCER_ID, 4, {
                "transactional_id": txn_id, "transaction_timeout_ms": 60000,
                "producer_id": -1, "producer_epoch": -1})

        assert init("no-1")["error_code"] == needs.TXN_DENIED
        ok = init("ok-1")
        assert ok["error_code"] == 0
        added = c.request(schemas.ADD_PARTITIONS_TO_TXN, 3, {
            "transactional_id": "ok-1", "producer_id": ok["producer_id"],
            "producer_epoch": ok["producer_epoch"],
            "topics": [{"name": "t", "partitions": [0]}, {"name": "u", "partitions": [0]}]})
        assert [[p["partition_error_code"] for p in t["results"]]
                for t in added["results"]] == [[errors.OPERATION_NOT_ATTEMPTED],
                                               [errors.TOPIC_AUTHORIZATION_FAILED]]
        body = produce_body("t", 0, batch([b"x"]))
        body["transactional_id"] = "no-1"
        refused = c.request(schemas.PRODUCE, 8, body)
        assert refused["responses"][0]["partition_responses"][0]["error_code"] == \
            needs.TXN_DENIED


def test_compaction_keeps_markers_and_transactions_sane(tmp_path):
    """A compacted topic holding committed and aborted transactions: the cleaner removes
    superseded plain records and the aborted transaction's records (as Kafka's does: even
    read_uncommitted no longer sees them), and read_committed still sees every committed
    transactional record and never an aborted one."""
    log_path = tmp_path / "broker.log"
    with EmbeddedBroker(data_dir=tmp_path / "data", log_path=log_path) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic("ctx", 1, 1, config={
            "cleanup.policy": "compact", "segment.bytes": "4096",
            "min.cleanable.dirty.ratio": "0.01"})])["ctx"].result(timeout=30)
        plain = ck.Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 2})
        for version in range(3):
            for k in range(10):
                plain.produce("ctx", key=b"k%d" % k, value=b"plain-%d" % version)
        plain.flush(10)
        p = txn_producer(b.bootstrap, "ctx-tid")
        p.begin_transaction()
        for k in range(5):
            p.produce("ctx", key=b"k%d" % k, value=b"committed")
        p.commit_transaction(30)
        p.begin_transaction()
        for k in range(5, 10):
            p.produce("ctx", key=b"k%d" % k, value=b"aborted")
        p.flush(10)
        p.abort_transaction(30)
        for i in range(80):  # distinct keys: push the above out of the active segment
            plain.produce("ctx", key=b"fill-%d" % i, value=b"x" * 100)
        plain.flush(10)
        deadline = time.monotonic() + 30
        while not any('"broker.log_cleaned"' in line and '"records_removed": 0' not in line
                      for line in log_path.read_text().splitlines()):
            assert time.monotonic() < deadline, "no compaction pass removed anything"
            time.sleep(0.5)
        values = _values(b.bootstrap, "ctx", "read_committed", wait_s=15)
        everything = _values(b.bootstrap, "ctx", "read_uncommitted", wait_s=15)
    assert values.count(b"committed") == 5 and b"aborted" not in values
    assert values.count(b"plain-2") == 10 and b"plain-0" not in values
    assert everything.count(b"committed") == 5 and b"aborted" not in everything



def test_the_last_stable_offset_and_aborted_transactions_on_the_wire(broker):
    """Fetch read_committed stops at the open transaction's first offset (its LSO), and
    ListOffsets latest answers the LSO; after the abort its marker ends it and the fetch
    names it (producer id, first offset) so clients drop its records."""
    topic, txn_id = unique_name("lso"), unique_name("w")
    broker.create_topics({topic: 1})
    with WireClient(broker.bootstrap) as c:
        init = c.request(schemas.INIT_PRODUCER_ID, 4, {
            "transactional_id": txn_id, "transaction_timeout_ms": 60000,
            "producer_id": -1, "producer_epoch": -1})
        pid, epoch = init["producer_id"], init["producer_epoch"]

        def send(records: bytes) -> dict:
            return c.request(schemas.PRODUCE, 8, produce_body(topic, 0, records))[
                "responses"][0]["partition_responses"][0]

        def read(isolation: int) -> dict:
            body = fetch_body(topic, 0, 0)
            body["isolation_level"] = isolation
            return c.request(schemas.FETCH, 11, body)["responses"][0]["partitions"][0]

        def latest(isolation: int) -> int:
            return c.request(schemas.LIST_OFFSETS, 5, {
                "replica_id": -1, "isolation_level": isolation,
                "topics": [{"name": topic, "partitions": [{
                    "partition_index": 0, "current_leader_epoch": -1,
                    "timestamp": -1}]}]})["topics"][0]["partitions"][0]["offset"]

        builder = DefaultRecordBatchBuilder(
            magic=2, compression_type=0, is_transactional=True, producer_id=pid,
            producer_epoch=epoch, base_sequence=0, batch_size=1 << 30)
        for i in range(2):
            builder.append(i, timestamp=1_700_000_000_000, key=None, value=b"t%d" % i,
                           headers=[])
        in_txn = bytes(builder.build())
        assert send(batch([b"plain-0"]))["base_offset"] == 0
        assert send(in_txn)["error_code"] == errors.INVALID_TXN_STATE  # not added yet
        added = c.request(schemas.ADD_PARTITIONS_TO_TXN, 3, {
            "transactional_id": txn_id, "producer_id": pid, "producer_epoch": epoch,
            "topics": [{"name": topic, "partitions": [0]}]})
        assert added["results"][0]["results"][0]["partition_error_code"] == 0
        assert send(in_txn)["base_offset"] == 1
        assert send(batch([b"plain-3"]))["base_offset"] == 3
        committed, everything = read(1), read(0)
        assert (committed["last_stable_offset"], committed["high_watermark"]) == (1, 4)
        assert record_values(committed["records"]) == [b"plain-0"]
        assert committed["aborted_transactions"] == []
        assert record_values(everything["records"]) == [b"plain-0", b"t0", b"t1", b"plain-3"]
        assert (latest(1), latest(0)) == (1, 4)
        assert c.request(schemas.END_TXN, 3, {
            "transactional_id": txn_id, "producer_id": pid, "producer_epoch": epoch,
            "committed": False})["error_code"] == 0
        committed = read(1)
        assert (committed["last_stable_offset"], committed["high_watermark"]) == (5, 5)
        assert committed["aborted_transactions"] == [{"producer_id": pid, "first_offset": 1}]
        assert latest(1) == 5


def test_an_open_transaction_whose_id_was_moved_aside_is_aborted_at_start(tmp_path):
    """The operator moved an unreadable transactions.json aside: a partition's open
    transaction has no coordinator any more. The broker aborts it at start (logged), so
    read_committed is not held at it for ever."""
    log_path = tmp_path / "broker.log"
    with EmbeddedBroker(data_dir=tmp_path / "data", log_path=log_path) as b:
        b.create_topics({"aside": 1})
        p = txn_producer(b.bootstrap, "aside-tid")
        p.begin_transaction()
        p.produce("aside", value=b"orphan")
        p.flush(10)
        b.stop()
        (tmp_path / "data" / "transactions.json").rename(tmp_path / "transactions.json.bad")
        b.start()
        plain = ck.Producer({"bootstrap.servers": b.bootstrap})
        plain.produce("aside", value=b"later")
        plain.flush(10)
        assert _values(b.bootstrap, "aside", "read_committed", expect=1) == [b"later"]
    assert '"broker.txn_state_reconciled"' in log_path.read_text()


def test_a_partition_file_that_missed_its_abort_is_reconciled_from_the_log(tmp_path):
    """The partition's txn-state lost the line ending an aborted transaction (a failed
    write): at start the broker finds the abort marker in the log, so read_committed
    still drops the aborted records and is not held at them."""
    log_path = tmp_path / "broker.log"
    with EmbeddedBroker(data_dir=tmp_path / "data", log_path=log_path) as b:
        b.create_topics({"missed": 1})
        p = txn_producer(b.bootstrap, "missed-tid")
        p.begin_transaction()
        p.produce("missed", value=b"dropped")
        p.flush(10)
        p.abort_transaction(30)
        p.begin_transaction()
        p.produce("missed", value=b"kept")
        p.commit_transaction(30)
        b.stop()
        state = tmp_path / "data" / "topics" / "missed" / "0" / "txn-state"
        lines = state.read_bytes().splitlines(keepends=True)
        assert [line[:4] for line in lines] == [b'{"b"', b'{"e"', b'{"b"', b'{"e"']
        state.write_bytes(b"".join(lines[:1]))  # the abort's end never written
        b.start()
        assert _values(b.bootstrap, "missed", "read_committed", expect=1) == [b"kept"]
    assert '"outcome": "aborted"' in log_path.read_text()


def test_a_decision_logged_before_a_crash_is_completed_at_start(tmp_path):
    """transactions.json says PrepareCommit (the broker died after logging the decision,
    before the markers): at start the commit is completed at once, not aborted at the
    timeout."""
    log_path = tmp_path / "broker.log"
    with EmbeddedBroker(data_dir=tmp_path / "data", log_path=log_path) as b:
        b.create_topics({"prep": 1})
        p = txn_producer(b.bootstrap, "prep-tid", **{"transaction.timeout.ms": 600000})
        p.begin_transaction()
        p.produce("prep", value=b"decided")
        p.flush(10)
        assert b.kill() == -9
        state = tmp_path / "data" / "transactions.json"
        last = json.loads(state.read_bytes().splitlines()[-1])
        assert last["status"] == "Ongoing"
        with open(state, "ab") as f:
            f.write(json.dumps({**last, "status": "PrepareCommit"}).encode() + b"\n")
        b.start()
        assert _values(b.bootstrap, "prep", "read_committed", expect=1, wait_s=5) == [
            b"decided"]
    assert '"broker.txn_completed_after_restart"' in log_path.read_text()
