"""ACLs with the real clients over SASL (SCRAM-SHA-512): kafka-python (the appliance's
client), librdkafka via confluent-kafka (the load generator's) and Java kafka-clients 3.9
(the connector's). ``User:admin`` is a super user and sets the ACLs with each client's
admin API (kafka-python's ``KafkaAdminClient.create_acls/describe_acls/delete_acls``,
confluent's ``AdminClient``); then ``User:alice`` may and ``User:bob`` may not produce,
fetch, join a group and delete a topic, each refusal the client's own authorization error.
Everyone (``User:*``) may read the data topic, but a DENY for bob wins over that ALLOW.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition
from kafka import errors as kp_errors
from kafka.admin import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    ResourcePattern,
    ResourcePatternFilter,
)
from kafka.admin import ResourceType as KpResourceType

from appliance.broker import EmbeddedBroker
from appliance.broker.security.credentials import add_user

from support.broker.java_programs import run_java
from support.secure_helpers import broker_args, new_password, write_private

MECHANISM = "SCRAM-SHA-512"
USERS = ("admin", "alice", "bob")
FAMILIES = ("kp", "rd", "java")
TOPICS = ",".join([f"{f}-{t}:1" for f in FAMILIES for t in ("data", "doomed")]
                  + ["scratch-bob:1"])


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    d = tmp_path_factory.mktemp("acl-clients")
    passwords = {u: new_password() for u in USERS}
    for user, password in passwords.items():
        add_user(d / "users.toml", user, password, (MECHANISM,))
    data = d / "data"
    data.mkdir()
    b = EmbeddedBroker(data_dir=data, log_path=d / "broker.log", extra_args=[
        *broker_args("SASL_PLAINTEXT", users=d / "users.toml", mechanisms=MECHANISM),
        "--topics", TOPICS, "--authorizer", "acl", "--super-users", "User:admin",
        "--group-initial-rebalance-delay-ms", "0"]).start()
    b.passwords = passwords
    yield b
    b.stop()


# -- kafka-python ---------------------------------------------------------------------------

def _kp(b, user: str) -> dict:
    return {"bootstrap_servers": b.bootstrap, "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": MECHANISM, "sasl_plain_username": user,
            "sasl_plain_password": b.passwords[user], "request_timeout_ms": 10000}


def _kp_acl(principal, op, rtype, name, permission=ACLPermissionType.ALLOW,
            pattern=ACLResourcePatternType.LITERAL):
    return ACL(principal, "*", op, permission, ResourcePattern(rtype, name, pattern))


def _family_acls(family: str) -> list[tuple]:
    """(principal, operation name, resource type name, resource name, permission name)"""
    return [("User:alice", "WRITE", "TOPIC", f"{family}-data", "ALLOW"),
            ("User:*", "READ", "TOPIC", f"{family}-data", "ALLOW"),
            ("User:bob", "READ", "TOPIC", f"{family}-data", "DENY"),
            ("User:alice", "READ", "GROUP", f"{family}-group", "ALLOW"),
            # librdkafka's assign()ing consumers still need a group.id they may use
            ("User:*", "READ", "GROUP", f"{family}-fetchers", "ALLOW"),
            ("User:alice", "DELETE", "TOPIC", f"{family}-doomed", "ALLOW"),
            ("User:bob", "WRITE", "TOPIC", "scratch-bob", "ALLOW")]


def _kp_grant(b, family: str) -> None:
    admin = KafkaAdminClient(**_kp(b, "admin"))
    try:
        acls = [_kp_acl(p, ACLOperation[op], KpResourceType[rt], name, ACLPermissionType[perm])
                for p, op, rt, name, perm in _family_acls(family)]
        result = admin.create_acls(acls)
        assert result["failed"] == [] and len(result["succeeded"]) == len(acls)
    finally:
        admin.close()


def test_kafka_python_admin_creates_describes_and_deletes_acls(broker):
    admin = KafkaAdminClient(**_kp(broker, "admin"))
    try:
        made = [_kp_acl("User:carol", ACLOperation.READ, KpResourceType.TOPIC, "kp-c-"
                        , pattern=ACLResourcePatternType.PREFIXED),
                _kp_acl("User:carol", ACLOperation.READ, KpResourceType.GROUP, "carols")]
        assert len(admin.create_acls(made)["succeeded"]) == 2
        everything = ACLFilter(principal="User:carol", host=None,
                               operation=ACLOperation.ANY,
                               permission_type=ACLPermissionType.ANY,
                               resource_pattern=ResourcePatternFilter(
                                   KpResourceType.ANY, None, ACLResourcePatternType.ANY))
        found, error = admin.describe_acls(everything)
        assert error is kp_errors.NoError
        assert {(a.resource_pattern.resource_type, a.resource_pattern.resource_name,
                 a.resource_pattern.pattern_type) for a in found} == {
            (KpResourceType.TOPIC, "kp-c-", ACLResourcePatternType.PREFIXED),
            (KpResourceType.GROUP, "carols", ACLResourcePatternType.LITERAL)}
        match = ACLFilter(principal=None, host=None, operation=ACLOperation.ANY,
                          permission_type=ACLPermissionType.ANY,
                          resource_pattern=ResourcePatternFilter(
                              KpResourceType.TOPIC, "kp-c-topic",
                              ACLResourcePatternType.MATCH))
        found, _ = admin.describe_acls(match)
        assert [a.principal for a in found] == ["User:carol"]
        [(_, deleted, error)] = admin.delete_acls([everything])
        assert error is kp_errors.NoError and len(deleted) == 2
        assert admin.describe_acls(everything)[0] == []
    finally:
        admin.close()
    refused = KafkaAdminClient(**_kp(broker, "alice"))  # not a super user, no ALTER
    try:
        result = refused.create_acls([_kp_acl("User:alice", ACLOperation.ALL,
                                               KpResourceType.TOPIC, "*")])
        assert result["succeeded"] == []
        assert result["failed"] == [kp_errors.ClusterAuthorizationFailedError]
        with pytest.raises(kp_errors.ClusterAuthorizationFailedError):
            refused.describe_acls(ACLFilter(
                principal=None, host=None, operation=ACLOperation.ANY,
                permission_type=ACLPermissionType.ANY, resource_pattern=ResourcePatternFilter(
                    KpResourceType.ANY, None, ACLResourcePatternType.ANY)))
    finally:
        refused.close()


def _kp_poll_until(consumer, done, seconds: float = 20.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        records = consumer.poll(timeout_ms=200)
        if done(records):
            return True
    return False


def test_kafka_python_allowed_and_denied(broker):
    _kp_grant(broker, "kp")
    producer = KafkaProducer(**_kp(broker, "alice"), max_block_ms=10000)
    try:
        producer.send("kp-data", b"from-alice", partition=0).get(timeout=15)
    finally:
        producer.close(timeout=5)
    producer = KafkaProducer(**_kp(broker, "bob"), max_block_ms=10000)
    try:
        with pytest.raises(kp_errors.TopicAuthorizationFailedError):
            producer.send("kp-data", b"from-bob", partition=0).get(timeout=15)
    finally:
        producer.close(timeout=5)

    tp = KpTopicPartition("kp-data", 0)
    for user, allowed in (("alice", True), ("bob", False)):
        consumer = KafkaConsumer(**_kp(broker, user), enable_auto_commit=False)
        try:
            consumer.assign([tp])
            consumer.seek(tp, 0)
            if allowed:
                assert _kp_poll_until(consumer, lambda r: bool(r.get(tp)))
            else:  # the User:* ALLOW is overruled by bob's DENY
                with pytest.raises(kp_errors.TopicAuthorizationFailedError):
                    _kp_poll_until(consumer, lambda r: False, 10)
        finally:
            consumer.close()

    for user, allowed in (("alice", True), ("bob", False)):
        consumer = KafkaConsumer(**_kp(broker, user), group_id="kp-group",
                                 enable_auto_commit=False, auto_offset_reset="earliest")
        try:
            consumer.subscribe(["kp-data"])
            if allowed:
                assert _kp_poll_until(consumer, lambda r, c=consumer: bool(c.assignment()))
            else:
                with pytest.raises(kp_errors.GroupAuthorizationFailedError):
                    _kp_poll_until(consumer, lambda r: False, 10)
        finally:
            consumer.close()

    for user, allowed in (("bob", False), ("alice", True)):
        admin = KafkaAdminClient(**_kp(broker, user))
        try:
            if allowed:
                admin.delete_topics(["kp-doomed"])
            else:
                with pytest.raises(kp_errors.TopicAuthorizationFailedError):
                    admin.delete_topics(["kp-doomed"], raise_errors=True)
        finally:
            admin.close()
    admin = KafkaAdminClient(**_kp(broker, "admin"))
    try:
        assert "kp-doomed" not in admin.list_topics()
    finally:
        admin.close()


# -- librdkafka -----------------------------------------------------------------------------

def _rd(b, user: str) -> dict:
    return {"bootstrap.servers": b.bootstrap, "security.protocol": "sasl_plaintext",
            "sasl.mechanism": MECHANISM, "sasl.username": user,
            "sasl.password": b.passwords[user], "log_level": 0}


def test_confluent_admin_and_clients_allowed_and_denied(broker):
    admin = AdminClient(_rd(broker, "admin"))
    bindings = [AclBinding(ResourceType[rt], name, ResourcePatternType.LITERAL, p, "*",
                           AclOperation[op], AclPermissionType[perm])
                for p, op, rt, name, perm in _family_acls("rd")]
    for future in admin.create_acls(bindings, request_timeout=15).values():
        assert future.result(timeout=20) is None
    alice_filter = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY,
                                    "User:alice", None, AclOperation.ANY,
                                    AclPermissionType.ANY)
    described = admin.describe_acls(alice_filter, request_timeout=15).result(timeout=20)
    assert {(b.name, b.operation) for b in described if b.name.startswith("rd-")} == {
        ("rd-data", AclOperation.WRITE), ("rd-group", AclOperation.READ),
        ("rd-doomed", AclOperation.DELETE)}
    assert any(b.principal == "User:bob" and b.permission_type == AclPermissionType.DENY
               for b in admin.describe_acls(AclBindingFilter(
                   ResourceType.TOPIC, "rd-data", ResourcePatternType.MATCH, None, None,
                   AclOperation.ANY, AclPermissionType.ANY), request_timeout=15).result(20))

    delivered = []
    for user in ("alice", "bob"):
        producer = Producer({**_rd(broker, user), "message.timeout.ms": 10000})
        producer.produce("rd-data", f"from-{user}".encode(), partition=0,
                         on_delivery=lambda err, msg, u=user: delivered.append((u, err)))
        producer.flush(20)
    results = dict(delivered)
    assert results["alice"] is None
    assert results["bob"].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    for user, allowed in (("alice", True), ("bob", False)):
        consumer = Consumer({**_rd(broker, user), "group.id": "rd-fetchers",
                             "enable.auto.commit": False})
        try:
            consumer.assign([TopicPartition("rd-data", 0, 0)])
            outcome = None
            for _ in range(80):  # bounded: ~20 s
                msg = consumer.poll(0.25)
                if msg is not None:
                    outcome = msg.error().code() if msg.error() else "record"
                    break
            assert outcome == ("record" if allowed else KafkaError.TOPIC_AUTHORIZATION_FAILED)
        finally:
            consumer.close()

    for user, allowed in (("alice", True), ("bob", False)):
        consumer = Consumer({**_rd(broker, user), "group.id": "rd-group",
                             "enable.auto.commit": False, "auto.offset.reset": "earliest"})
        try:
            consumer.subscribe(["rd-data"])
            outcome = None
            for _ in range(80):  # bounded: ~20 s
                msg = consumer.poll(0.25)
                if msg is not None and msg.error():
                    outcome = msg.error().code()
                    break
                if consumer.assignment():
                    outcome = "assigned"
                    break
            assert outcome == ("assigned" if allowed else KafkaError.GROUP_AUTHORIZATION_FAILED)
        finally:
            consumer.close()

    for user, allowed in (("bob", False), ("alice", True)):
        client = AdminClient(_rd(broker, user))  # kept: its futures die with it
        future = client.delete_topics(["rd-doomed"], request_timeout=15)["rd-doomed"]
        if allowed:
            assert future.result(timeout=20) is None
        else:
            with pytest.raises(KafkaException) as info:
                future.result(timeout=20)
            assert info.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    removed = admin.delete_acls([AclBindingFilter(
        ResourceType.TOPIC, "rd-doomed", ResourcePatternType.LITERAL, None, None,
        AclOperation.ANY, AclPermissionType.ANY)], request_timeout=15)
    [deleted] = [f.result(timeout=20) for f in removed.values()]
    assert [(b.principal, b.operation) for b in deleted] == [("User:alice",
                                                                AclOperation.DELETE)]


# -- Java kafka-clients ---------------------------------------------------------------------

@pytest.mark.java
def test_java_client_allowed_and_denied(broker, java_checks, tmp_path):
    _kp_grant(broker, "java")
    files = []
    for user in ("alice", "bob"):
        for action, topic in (("produce", "java-data"), ("fetch", "java-data"),
                              ("group", "java-data"), ("delete", "java-doomed")):
            if user == "alice" and action == "delete":
                continue  # after bob's refusal, below
            files.append(_java_file(tmp_path, broker, user, action, topic))
    files.append(_java_file(tmp_path, broker, "alice", "delete", "java-doomed"))
    out = run_java(java_checks, "AclCheck", *files, timeout=300)
    assert out["alice-produce"] == "ok"
    assert out["alice-fetch"] == "ok"
    assert out["alice-group"] == "ok"
    assert out["alice-delete"] == "ok"
    assert out["bob-produce"] == "TopicAuthorizationException"
    assert out["bob-fetch"] == "TopicAuthorizationException"  # DENY over User:* ALLOW
    assert out["bob-group"] == "GroupAuthorizationException"
    assert out["bob-delete"] == "TopicAuthorizationException"


def _java_file(tmp_path, b, user: str, action: str, topic: str) -> str:
    path = tmp_path / f"{user}-{action}.properties"
    write_private(path, "\n".join([
        f"check.name={user}-{action}", f"check.action={action}", f"check.topic={topic}",
        "check.group=java-group", f"bootstrap.servers={b.bootstrap}",
        "security.protocol=SASL_PLAINTEXT", f"sasl.mechanism={MECHANISM}",
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{user}" password="{b.passwords[user]}";']) + "\n")
    return str(path)
