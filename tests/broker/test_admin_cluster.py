"""The cluster-administration calls real tools make (issue 46, item 8), with real clients:
kafka-python's and librdkafka's admin clients and Java's Admin (3.9) against the broker
answer as a one-node Kafka would: log directories, DescribeTopicPartitions (KIP-966),
ListConfigResources, leader elections and partition reassignments (nothing to do, and
said so), ListOffsets by max timestamp (KIP-734), the broker's configs by Kafka's names,
and SCRAM users managed through the admin API (KIP-554): a user added that way logs in,
one deleted that way no longer does."""

from __future__ import annotations

import stat

import confluent_kafka as ck
import pytest
from confluent_kafka import ElectionType
from confluent_kafka.admin import (
    AdminClient,
    OffsetSpec,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from kafka import KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient
from kafka.admin import OffsetSpec as KpOffsetSpec
from kafka.admin import ScramMechanism as KpScramMechanism
from kafka.admin import UserScramCredentialUpsertion as ScramUpsertion
from kafka.errors import InvalidReplicationAssignmentError

from appliance.broker import EmbeddedBroker
from appliance.broker.wire import errors

from support.broker.java_programs import run_java
from support.secure_helpers import USER, make_users, new_password

STAMPS = (1_000, 9_000, 4_000)  # partition 0's records; the largest is offset 1


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    d = tmp_path_factory.mktemp("cluster-admin")
    with EmbeddedBroker(data_dir=d / "data", topics={"ca": 3},
                        log_path=d / "broker.log") as b:
        producer = KafkaProducer(bootstrap_servers=b.bootstrap)
        for i, ts in enumerate(STAMPS):
            producer.send("ca", b"v%d" % i, partition=0, timestamp_ms=ts)
        producer.flush()
        producer.close()
        yield b


def test_kafka_python_log_dirs_topic_partitions_and_config_resources(cluster):
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        (broker,) = admin.describe_log_dirs()
        (log_dir,) = broker["log_dirs"]
        assert log_dir["log_dir"].endswith("/data") and log_dir["total_bytes"] > 0
        sizes = {p["partition_index"]: p["partition_size"]
                 for t in log_dir["topics"] if t["name"] == "ca" for p in t["partitions"]}
        assert sizes[0] > 0 and sizes[1] == sizes[2] == 0
        page = admin.describe_topic_partitions(["ca"], response_partition_limit=2)
        assert [p["partition_index"] for p in page["topics"][0]["partitions"]] == [0, 1]
        assert page["next_cursor"] == {"topic_name": "ca", "partition_index": 2}
        rest = admin.describe_topic_partitions(["ca"], cursor=page["next_cursor"])
        assert [p["partition_index"] for p in rest["topics"][0]["partitions"]] == [2]
        assert rest["next_cursor"] is None
        assert admin.list_config_resources() == {"topic": ["ca"], "broker": ["0"]}
    finally:
        admin.close()


def test_kafka_python_elections_reassignments_and_max_timestamp(cluster):
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        elected = admin.elect_leaders(0, {"ca": [0]}, raise_errors=False)
        (result,) = elected.replica_election_results[0].partition_result
        assert result.error_code == errors.ELECTION_NOT_NEEDED
        assert admin.list_partition_reassignments() == {}
        moved = admin.alter_partition_reassignments({TopicPartition("ca", 0): [0],
                                                     TopicPartition("ca", 1): [1]})
        assert moved[TopicPartition("ca", 0)] is None
        assert moved[TopicPartition("ca", 1)] is InvalidReplicationAssignmentError
        offsets = admin.list_partition_offsets({TopicPartition("ca", 0):
                                                KpOffsetSpec.MAX_TIMESTAMP})
        found = offsets[TopicPartition("ca", 0)]
        assert (found.offset, found.timestamp) == (1, max(STAMPS))
    finally:
        admin.close()


def test_librdkafka_elections_max_timestamp_and_topics(cluster):
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    tp = ck.TopicPartition("ca", 0)
    elected = admin.elect_leaders(ElectionType.PREFERRED, [tp]).result(timeout=30)
    assert elected[tp].name() == "ELECTION_NOT_NEEDED"
    found = admin.list_offsets({tp: OffsetSpec.max_timestamp()})[tp].result(timeout=30)
    assert (found.offset, found.timestamp) == (1, max(STAMPS))
    described = admin.describe_topics(ck.TopicCollection(["ca"]))["ca"].result(timeout=30)
    assert len(described.partitions) == 3 and described.partitions[2].leader.id == 0


@pytest.mark.java
def test_java_admin_cluster_calls(cluster, java_checks):
    out = run_java(java_checks, "ClusterAdminCheck", cluster.bootstrap, "java-cluster",
                   timeout=180)
    assert out["LOG_DIRS"] == "1,true,true"
    assert out["TOPIC"] == "3,0"
    assert out["ELECT"] == "ElectionNotNeededException"
    assert out["REASSIGNING"] == "0"
    assert out["REASSIGN_ELSEWHERE"] == "InvalidReplicaAssignmentException"
    assert out["MAX_TIMESTAMP"] == "1,9000"
    host, port = cluster.bootstrap.rsplit(":", 1)
    assert out["ADVERTISED"] == f"PLAINTEXT://{host}:{port}"
    assert out["MIN_ISR"] == "1"
    assert out["CLIENT_METRICS"] == "0"


# -- SCRAM users through the admin API ----------------------------------------------------

@pytest.fixture
def sasl_broker(tmp_path):
    password = new_password()
    users = make_users(tmp_path / "users.toml", password)
    b = EmbeddedBroker(log_path=tmp_path / "broker.log", topics={"s": 1}, extra_args=[
        "--security-protocol", "SASL_PLAINTEXT", "--sasl-users", str(users),
        "--sasl-mechanisms", "SCRAM-SHA-256,SCRAM-SHA-512"]).start()
    b.password = password
    b.users_file = users
    yield b
    b.stop()


def _scram_config(user: str, password: str, mechanism: str = "SCRAM-SHA-512") -> dict:
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
            "sasl.username": user, "sasl.password": password}


def _logs_in(bootstrap: str, user: str, password: str,
             mechanism: str = "SCRAM-SHA-512") -> bool:
    producer = ck.Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 8000,
                            **_scram_config(user, password, mechanism)})
    delivered: list = []
    producer.produce("s", b"hello", on_delivery=lambda err, _m: delivered.append(err))
    producer.flush(15)
    # not `delivered == [None]`: comparing a KafkaError with None raises TypeError
    return len(delivered) == 1 and delivered[0] is None


def test_scram_users_are_managed_through_the_admin_api(sasl_broker):
    b = sasl_broker
    admin = AdminClient({"bootstrap.servers": b.bootstrap,
                         **_scram_config(USER, b.password)})
    new_password_ = new_password()
    upsert = UserScramCredentialUpsertion(
        "carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192),
        new_password_.encode())
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(timeout=30)
    assert _logs_in(b.bootstrap, "carol", new_password_)
    described = admin.describe_user_scram_credentials(["carol"])["carol"].result(timeout=30)
    (info,) = described.scram_credential_infos
    assert (info.mechanism, info.iterations) == (ScramMechanism.SCRAM_SHA_512, 8192)
    text = b.users_file.read_text()
    assert "[users.carol.SCRAM-SHA-512]" in text and new_password_ not in text
    assert stat.S_IMODE(b.users_file.stat().st_mode) == 0o600

    kp = KafkaAdminClient(bootstrap_servers=b.bootstrap, security_protocol="SASL_PLAINTEXT",
                          sasl_mechanism="SCRAM-SHA-512", sasl_plain_username=USER,
                          sasl_plain_password=b.password)
    try:
        listed = kp.describe_user_scram_credentials()
        assert {"carol", USER} <= set(listed)
    finally:
        kp.close()
    deletion = UserScramCredentialDeletion("carol", ScramMechanism.SCRAM_SHA_512)
    for future in admin.alter_user_scram_credentials([deletion]).values():
        future.result(timeout=30)
    assert not _logs_in(b.bootstrap, "carol", new_password_)
    with pytest.raises(ck.KafkaException, match="RESOURCE_NOT_FOUND"):
        for future in admin.alter_user_scram_credentials([deletion]).values():
            future.result(timeout=30)


def test_scram_alterations_are_refused_with_nowhere_to_keep_users(broker):
    """An in-memory broker without --sasl-users has no file to keep users in."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    upsert = UserScramCredentialUpsertion(
        "dave", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"pw")
    with pytest.raises(ck.KafkaException, match="SECURITY_DISABLED"):
        for future in admin.alter_user_scram_credentials([upsert]).values():
            future.result(timeout=30)


def test_a_broker_with_a_data_dir_keeps_scram_users_its_sasl_listener_uses(tmp_path):
    """Issue 53, item 3: no --sasl-users, only a data directory. Users created through the
    admin API (librdkafka) on the plaintext broker are kept in DATA_DIR/users.toml (0600,
    no password); started with a SASL listener on the same directory it logs them in, and
    a user one of them creates (kafka-python) logs in at once, without a restart."""
    data = tmp_path / "data"
    first = new_password()
    with EmbeddedBroker(data_dir=data, topics={"s": 1},
                        log_path=tmp_path / "plain.log") as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        upsert = UserScramCredentialUpsertion(
            "erin", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), first.encode())
        for future in admin.alter_user_scram_credentials([upsert]).values():
            future.result(timeout=30)
        described = admin.describe_user_scram_credentials(["erin"])["erin"].result(timeout=30)
        assert [i.iterations for i in described.scram_credential_infos] == [8192]
    users_file = data / "users.toml"
    assert stat.S_IMODE(users_file.stat().st_mode) == 0o600
    assert "[users.erin.SCRAM-SHA-512]" in users_file.read_text()
    assert first not in users_file.read_text()
    second = new_password()
    with EmbeddedBroker(data_dir=data, log_path=tmp_path / "sasl.log", extra_args=[
            "--security-protocol", "SASL_PLAINTEXT",
            "--sasl-mechanisms", "SCRAM-SHA-256,SCRAM-SHA-512"]) as b:
        assert _logs_in(b.bootstrap, "erin", first)
        kp = KafkaAdminClient(bootstrap_servers=b.bootstrap,
                              security_protocol="SASL_PLAINTEXT",
                              sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="erin",
                              sasl_plain_password=first)
        try:
            kp.alter_user_scram_credentials([ScramUpsertion(
                "frank", KpScramMechanism.SCRAM_SHA_256, second, iterations=4096)])
            assert {"erin", "frank"} <= set(kp.describe_user_scram_credentials())
        finally:
            kp.close()
        assert _logs_in(b.bootstrap, "frank", second, "SCRAM-SHA-256")
        assert not _logs_in(b.bootstrap, "frank", first, "SCRAM-SHA-256")
