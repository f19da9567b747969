"""What ``kafka-transactions`` and the admin clients ask about transactions (KIP-664):
ListTransactions, DescribeTransactions and DescribeProducers, with the Java Admin client
and kafka-python's against an open, a committed and an aborted transaction; their ACLs
as Kafka has them; and the transaction metrics a scrape shows. librdkafka
(confluent-kafka 2.16) has no admin call for any of the three."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import confluent_kafka as ck
import pytest
from kafka.admin import KafkaAdminClient
from kafka.errors import TransactionalIdNotFoundError, UnknownTopicOrPartitionError
from kafka.structs import TopicPartition

from appliance.broker import EmbeddedBroker
from appliance.broker.acl import needs
from appliance.broker.wire import errors, schemas
from appliance.broker.wire.client import WireClient

from support.broker.java_programs import run_java
from support.broker.txn_producers import txn_producer, unique_name
from support.scrape import samples as scrape_samples


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    data = tmp_path_factory.mktemp("txn-admin")
    with EmbeddedBroker(data_dir=data, log_path=data / "broker.log",
                        extra_args=["--metrics-port", "0"]) as b:
        yield b


def _three_transactions(bootstrap: str, topic: str, prefix: str) -> ck.Producer:
    """``prefix``-committed (3 records on partition 0), ``prefix``-aborted (1 on
    partition 1), and ``prefix``-open (one on each) left open: its producer returned."""
    committed = txn_producer(bootstrap, prefix + "committed")
    committed.begin_transaction()
    for i in range(3):
        committed.produce(topic, value=b"c%d" % i, partition=0)
    committed.commit_transaction(30)
    aborted = txn_producer(bootstrap, prefix + "aborted")
    aborted.begin_transaction()
    aborted.produce(topic, value=b"a", partition=1)
    aborted.flush(10)
    aborted.abort_transaction(30)
    opened = txn_producer(bootstrap, prefix + "open")
    opened.begin_transaction()
    opened.produce(topic, value=b"o0", partition=0)
    opened.produce(topic, value=b"o1", partition=1)
    opened.flush(10)
    return opened


def test_the_java_admin_client_lists_and_describes_transactions_and_producers(
        broker, java_checks):
    topic = unique_name("jtx")
    out = run_java(java_checks, "TxnAdminCheck", broker.bootstrap, topic, timeout=240)
    assert out["LISTED"] == "aborted:CompleteAbort,committed:CompleteCommit,open:Ongoing"
    assert out["LISTED_ONGOING"] == "open:Ongoing"
    assert out["LISTED_BY_PID"] == "committed:CompleteCommit"
    assert out["LISTED_OLDER_THAN_1S"] == "open:Ongoing"  # only an open one has a start
    assert out["LISTED_OLDER_THAN_1H"] == ""
    # state, epoch, timeout (the Java default), a start time, partitions, coordinator
    assert out["DESCRIBED_OPEN"] == f"Ongoing,0,60000,true,{topic}-0+{topic}-1,0"
    assert out["DESCRIBED_COMMITTED"] == "CompleteCommit,0,60000,false,,0"
    assert out["DESCRIBED_ABORTED"] == "CompleteAbort,0,60000,false,,0"
    assert out["DESCRIBED_UNKNOWN"] == "TransactionalIdNotFoundException"
    # producer:epoch:last sequence:has a timestamp:coordinator epoch:open txn's start
    # offset. Partition 0: committed's 3 records at 0-2, its marker at 3, open's at 4.
    assert out["PRODUCERS_0"] == "committed:0:2:true:0:-1,open:0:0:true:-1:4"
    assert out["PRODUCERS_1"] == "aborted:0:0:true:0:-1,open:0:0:true:-1:2"
    assert out["AFTER_COMMIT"] == "CompleteCommit"


def test_kafka_python_lists_and_describes_transactions_and_producers(broker):
    topic = unique_name("kptx")
    prefix = topic + "-"
    broker.create_topics({topic: 2})
    opened = _three_transactions(broker.bootstrap, topic, prefix)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=30000)
    try:
        def listed(**filters) -> dict[str, str]:
            by_broker = admin.list_transactions(**filters)
            return {t.transactional_id[len(prefix):]: str(t.state.value)
                    for listings in by_broker.values() for t in listings
                    if t.transactional_id.startswith(prefix)}

        assert listed() == {"committed": "CompleteCommit", "aborted": "CompleteAbort",
                            "open": "Ongoing"}
        assert listed(state_filters=["Ongoing"]) == {"open": "Ongoing"}
        # v2 (KIP-1152): a pattern over whole ids
        assert listed(transactional_id_pattern=f"{prefix}(open|aborted)") == {
            "open": "Ongoing", "aborted": "CompleteAbort"}
        assert listed(transactional_id_pattern="committed") == {}
        described = admin.describe_transactions([prefix + "open", prefix + "committed"])
        assert described[prefix + "open"].topic_partitions == {TopicPartition(topic, 0),
                                                               TopicPartition(topic, 1)}
        assert described[prefix + "committed"].topic_partitions == set()
        open_pid = described[prefix + "open"].producer_id
        assert listed(producer_id_filters=[open_pid]) == {"open": "Ongoing"}
        with pytest.raises(TransactionalIdNotFoundError):
            admin.describe_transactions([prefix + "never"])
        producers = admin.describe_producers([TopicPartition(topic, 1)])
        rows = {p.producer_id: p for p in
                producers[TopicPartition(topic, 1)].active_producers}
        assert rows[open_pid].current_transaction_start_offset == 2
        assert rows[open_pid].coordinator_epoch == -1  # no marker of it here yet
        with pytest.raises(UnknownTopicOrPartitionError):
            admin.describe_producers([TopicPartition(topic, 9)])
        # the open one is seconds old: not hanging (past the 15-minute maximum timeout)
        assert admin.find_hanging_transactions() == []
    finally:
        admin.close()
        opened.abort_transaction(30)


def test_confluent_kafka_has_no_transaction_admin_calls():
    """If a librdkafka release adds them, this test says so: test them then."""
    from confluent_kafka.admin import AdminClient

    calls = {"list_transactions", "describe_transactions", "describe_producers"}
    assert not calls & set(dir(AdminClient)), ck.version()


def test_unknown_state_filters_and_bad_patterns_are_answered_as_kafka_does(broker):
    with WireClient(broker.bootstrap) as c:
        listed = c.request(schemas.LIST_TRANSACTIONS, 1, {
            "state_filters": ["Ongoing", "Dead", "Sleeping"], "producer_id_filters": [],
            "duration_filter": -1})
        assert listed["error_code"] == 0
        assert listed["unknown_state_filters"] == ["Sleeping"]  # Dead is Kafka's: known
        bad = c.request(schemas.LIST_TRANSACTIONS, 2, {
            "state_filters": [], "producer_id_filters": [], "duration_filter": -1,
            "transactional_id_pattern": "(unclosed"})
        assert bad["error_code"] == errors.INVALID_REGULAR_EXPRESSION
        empty = c.request(schemas.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [""]})
        assert empty["transaction_states"][0]["error_code"] == errors.INVALID_REQUEST


def _acl(data, *args, permission: str = "--allow-principal") -> None:
    done = subprocess.run([sys.executable, "-m", "appliance", "broker-user", "acl", "add",
                           permission, "User:ANONYMOUS", *args, "--data-dir", str(data)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_the_admin_calls_are_authorized_as_kafka_does(tmp_path):
    """DescribeProducers needs READ on the topic; DescribeTransactions DESCRIBE on the id
    (its partitions shown only of topics the caller may describe); ListTransactions lists
    only ids the caller may describe."""
    data = tmp_path / "acl"
    data.mkdir()
    _acl(data, "--operation", "WRITE", "--transactional-id", "ok-",
         "--resource-pattern-type", "prefixed")
    _acl(data, "--operation", "WRITE", "--transactional-id", "hidden-",
         "--resource-pattern-type", "prefixed")
    _acl(data, "--operation", "WRITE", "--topic", "seen")
    _acl(data, "--operation", "WRITE", "--topic", "unseen")
    _acl(data, "--operation", "READ", "--topic", "seen")
    with EmbeddedBroker(data_dir=data, log_path=tmp_path / "b.log", extra_args=[
            "--topics", "seen:1,unseen:1", "--authorizer", "acl"]) as b:
        p = txn_producer(b.bootstrap, "ok-1")
        p.begin_transaction()
        p.produce("seen", value=b"x", partition=0)
        p.produce("unseen", value=b"y", partition=0)
        p.flush(10)
        hidden = txn_producer(b.bootstrap, "hidden-1")
        # now that both are written, take DESCRIBE of hidden- and of unseen away (a DENY
        # wins over the WRITE that implied it)
        _acl(data, "--operation", "DESCRIBE", "--transactional-id", "hidden-",
             "--resource-pattern-type", "prefixed", permission="--deny-principal")
        _acl(data, "--operation", "DESCRIBE", "--topic", "unseen",
             permission="--deny-principal")
        b.proc.send_signal(signal.SIGHUP)  # the ACL file read again
        deadline = time.monotonic() + 20
        with WireClient(b.bootstrap) as c:
            def listed() -> list[str]:
                body = c.request(schemas.LIST_TRANSACTIONS, 1, {
                    "state_filters": [], "producer_id_filters": [], "duration_filter": -1})
                return sorted(t["transactional_id"] for t in body["transaction_states"])

            while listed() != ["ok-1"] and time.monotonic() < deadline:
                time.sleep(0.2)
            assert listed() == ["ok-1"]
            described = c.request(schemas.DESCRIBE_TRANSACTIONS, 0, {
                "transactional_ids": ["ok-1", "hidden-1"]})["transaction_states"]
            assert described[0]["error_code"] == 0
            assert [t["topic"] for t in described[0]["topics"]] == ["seen"]
            assert described[1]["error_code"] == needs.TXN_DENIED
            producers = c.request(schemas.DESCRIBE_PRODUCERS, 0, {"topics": [
                {"name": "seen", "partition_indexes": [0]},
                {"name": "unseen", "partition_indexes": [0]}]})["topics"]
            assert [t["partitions"][0]["error_code"] for t in producers] == [
                0, errors.TOPIC_AUTHORIZATION_FAILED]
            assert len(producers[0]["partitions"][0]["active_producers"]) == 1
        p.abort_transaction(30)
        hidden.flush(1)  # kept alive until here: its id stays held


def test_transaction_metrics_count_how_transactions_end(broker):
    topic = unique_name("mtx")
    broker.create_topics({topic: 1})

    def scraped() -> dict:
        return {(name, labels): v for (name, labels), v in
                scrape_samples(broker.metrics_url).items()
                if name.startswith(("broker_transaction", "broker_transactional"))}

    before = scraped()
    txn_id = unique_name("tid")
    p = txn_producer(broker.bootstrap, txn_id)
    p.begin_transaction()
    p.produce(topic, value=b"1")
    p.commit_transaction(30)
    p.begin_transaction()
    p.produce(topic, value=b"2")
    p.flush(10)
    p.abort_transaction(30)
    p.begin_transaction()
    p.produce(topic, value=b"3")
    p.flush(10)
    during = scraped()
    assert during[("broker_transactions_ongoing", ())] >= 1
    assert during[("broker_transaction_oldest_ongoing_seconds", ())] > 0
    txn_producer(broker.bootstrap, txn_id)  # fences p and aborts its open transaction
    slow = txn_producer(broker.bootstrap, unique_name("tid"), **{"transaction.timeout.ms": 1000})
    slow.begin_transaction()
    slow.produce(topic, value=b"forgotten")
    slow.flush(10)
    deadline = time.monotonic() + 15  # the retention sweep (every second) aborts it

    def grew(after: dict, name: str, labels=()) -> float:
        return after[(name, labels)] - before.get((name, labels), 0.0)

    after = scraped()
    while (grew(after, "broker_transactions_aborted_total", (("reason", "timed_out"),)) < 1
           and time.monotonic() < deadline):
        time.sleep(0.3)
        after = scraped()
    assert grew(after, "broker_transactions_committed_total") == 1
    assert grew(after, "broker_transactions_aborted_total", (("reason", "requested"),)) == 1
    assert grew(after, "broker_transactions_aborted_total", (("reason", "fenced"),)) == 1
    assert grew(after, "broker_transactions_aborted_total", (("reason", "timed_out"),)) == 1
    # the second InitProducerId of txn_id and the timeout each fenced a producer
    assert grew(after, "broker_transaction_producers_fenced_total") == 2
    assert after[("broker_transactional_ids", ())] >= 2


def test_described_producers_survive_a_restart(tmp_path):
    """The coordinator epoch of a producer's last marker is kept in the partition's
    producer-state snapshot, and its open transaction's first offset in txn-state."""
    with EmbeddedBroker(data_dir=tmp_path / "data", log_path=tmp_path / "b.log",
                        topics={"r": 1}) as b:
        p = txn_producer(b.bootstrap, "restarted")
        p.begin_transaction()
        p.produce("r", value=b"committed")
        p.commit_transaction(30)  # offset 0, its marker at 1
        p.begin_transaction()
        p.produce("r", value=b"open")  # offset 2, left open
        p.flush(10)

        def described() -> list[tuple]:
            with WireClient(b.bootstrap) as c:
                body = c.request(schemas.DESCRIBE_PRODUCERS, 0, {
                    "topics": [{"name": "r", "partition_indexes": [0]}]})
            return [(a["producer_epoch"], a["last_sequence"], a["coordinator_epoch"],
                     a["current_txn_start_offset"])
                    for a in body["topics"][0]["partitions"][0]["active_producers"]]

        assert described() == [(0, 1, 0, 2)]
        b.restart()
        assert described() == [(0, 1, 0, 2)]
