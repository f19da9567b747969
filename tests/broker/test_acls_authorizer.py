"""Kafka's authorization semantics, decided by ``acl.authorizer`` without a network: deny by
default, DENY over ALLOW, implied DESCRIBE, wildcards, prefixes, hosts, super users, and
KIP-679's "WRITE on some topic" for idempotent producers. The same decisions are checked
through real clients in ``test_acls_clients.py``."""

from __future__ import annotations

import pytest

from appliance.broker.acl import needs
from appliance.broker.acl.authorizer import Authorizer
from appliance.broker.acl.model import (
    AclError,
    AclFilter,
    Operation,
    PatternType,
    Permission,
    ResourceType,
    make_binding,
)
from appliance.broker.caller import Caller
from appliance.broker.settings import AuthorizerKind


def who(principal: str, host: str = "127.0.0.1") -> Caller:
    return Caller("test", host, principal)


ALICE, BOB, ADMIN = who("User:alice"), who("User:bob"), who("User:admin")


def acl(name, op, principal="User:alice", permission="ALLOW", rtype="TOPIC",
        pattern="LITERAL", host="*"):
    return make_binding(rtype, name, pattern, principal, host, op, permission)


def authz(*bindings, super_users=("User:admin",)):
    return Authorizer(AuthorizerKind.ACL, super_users, list(bindings))


def test_off_allows_everything_and_on_denies_by_default():
    off = Authorizer(AuthorizerKind.NONE)
    assert off.allows(BOB, needs.DELETE_TOPICS, "events")
    on = authz()
    assert not on.allows(BOB, needs.DELETE_TOPICS, "events")
    assert not on.allows(BOB, needs.FETCH_TOPIC, "events")
    assert on.allows(ADMIN, needs.DELETE_TOPICS, "events")  # super user


def test_allow_is_per_operation_and_resource():
    a = authz(acl("events", "READ"))
    assert a.allows(ALICE, needs.FETCH_TOPIC, "events")
    assert not a.allows(ALICE, needs.PRODUCE_TOPIC, "events")
    assert not a.allows(ALICE, needs.FETCH_TOPIC, "alerts")
    assert not a.allows(BOB, needs.FETCH_TOPIC, "events")


def test_read_write_delete_alter_imply_describe_and_alter_configs_describe_configs():
    for op in ("READ", "WRITE", "DELETE", "ALTER"):
        assert authz(acl("t", op)).allows(ALICE, needs.METADATA_TOPIC, "t"), op
    for op in ("CREATE", "DESCRIBE_CONFIGS", "IDEMPOTENT_WRITE"):
        assert not authz(acl("t", op)).allows(ALICE, needs.METADATA_TOPIC, "t"), op
    assert authz(acl("t", "ALTER_CONFIGS")).allows(ALICE, needs.DESCRIBE_CONFIGS_TOPIC, "t")
    assert not authz(acl("t", "DESCRIBE")).allows(ALICE, needs.FETCH_TOPIC, "t")
    assert authz(acl("t", "ALL")).allows(ALICE, needs.DELETE_TOPICS, "t")


def test_deny_wins_over_allow_but_denying_read_does_not_deny_describe():
    a = authz(acl("t", "ALL"), acl("t", "READ", permission="DENY"))
    assert not a.allows(ALICE, needs.FETCH_TOPIC, "t")
    assert a.allows(ALICE, needs.PRODUCE_TOPIC, "t")
    assert a.allows(ALICE, needs.METADATA_TOPIC, "t")  # via ALL, not denied by READ
    everyone_denied = authz(acl("t", "WRITE"), acl("*", "ALL", principal="User:*",
                                                   permission="DENY"))
    assert not everyone_denied.allows(ALICE, needs.PRODUCE_TOPIC, "t")


def test_wildcards_prefixes_and_hosts():
    a = authz(acl("*", "READ", principal="User:*"),
              acl("logs.", "WRITE", pattern="PREFIXED"),
              acl("t", "DELETE", host="10.0.0.7"))
    assert a.allows(BOB, needs.FETCH_TOPIC, "anything")
    assert a.allows(ALICE, needs.PRODUCE_TOPIC, "logs.app1")
    assert not a.allows(ALICE, needs.PRODUCE_TOPIC, "log")
    assert not a.allows(ALICE, needs.PRODUCE_TOPIC, "xlogs.app1")
    assert a.allows(who("User:alice", "10.0.0.7"), needs.DELETE_TOPICS, "t")
    assert not a.allows(ALICE, needs.DELETE_TOPICS, "t")  # from 127.0.0.1
    prefixed_deny = authz(acl("*", "ALL"), acl("secret.", "READ", permission="DENY",
                                               pattern="PREFIXED"))
    assert not prefixed_deny.allows(ALICE, needs.FETCH_TOPIC, "secret.keys")
    assert prefixed_deny.allows(ALICE, needs.FETCH_TOPIC, "public")


def test_a_literal_star_is_not_a_prefix():
    a = authz(acl("ev*", "READ"))
    assert not a.allows(ALICE, needs.FETCH_TOPIC, "events")
    assert a.allows(ALICE, needs.FETCH_TOPIC, "ev*")


def test_idempotent_producer_needs_write_on_some_topic_or_idempotent_write():
    assert authz(acl("alerts", "WRITE")).allows_any(ALICE, needs.INIT_PRODUCER_ID_ANY_TOPIC)
    assert not authz(acl("alerts", "READ")).allows_any(ALICE,
                                                       needs.INIT_PRODUCER_ID_ANY_TOPIC)
    shadowed = authz(acl("alerts", "WRITE"), acl("al", "WRITE", permission="DENY",
                                                 pattern="PREFIXED"))
    assert not shadowed.allows_any(ALICE, needs.INIT_PRODUCER_ID_ANY_TOPIC)
    cluster = authz(acl("kafka-cluster", "IDEMPOTENT_WRITE", rtype="CLUSTER"))
    assert cluster.allows(ALICE, needs.INIT_PRODUCER_ID_CLUSTER, "kafka-cluster")


def test_changes_take_effect_at_once_despite_the_cache():
    a = authz()
    assert not a.allows(ALICE, needs.FETCH_TOPIC, "t")
    a.replace([acl("t", "READ")])
    assert a.allows(ALICE, needs.FETCH_TOPIC, "t")
    a.replace([])
    assert not a.allows(ALICE, needs.FETCH_TOPIC, "t")


def test_denials_are_counted_by_api_and_resource_type_and_listings_are_not():
    a = authz()
    a.allows(ALICE, needs.PRODUCE_TOPIC, "t")
    a.allows(ALICE, needs.PRODUCE_TOPIC, "u")
    a.allows(ALICE, needs.JOIN_GROUP, "g")
    a.allows(ALICE, needs.METADATA_ALL_TOPICS, "t")  # a listing narrowed: not audited
    assert a.denials == {("Produce", "TOPIC"): 2, ("JoinGroup", "GROUP"): 1}


def test_filters_match_as_kafka_describe_and_delete_do():
    lit = acl("events", "READ")
    star = acl("*", "READ")
    pre = acl("ev", "READ", pattern="PREFIXED")
    other = acl("alerts", "WRITE")
    every = [lit, star, pre, other]
    match = AclFilter(ResourceType.TOPIC, "events", PatternType.MATCH)
    assert [b for b in every if match.matches(b)] == [lit, star, pre]
    exact = AclFilter(ResourceType.TOPIC, "events", PatternType.LITERAL)
    assert [b for b in every if exact.matches(b)] == [lit]
    by_op = AclFilter(operation=Operation.WRITE, permission=Permission.ALLOW)
    assert [b for b in every if by_op.matches(b)] == [other]
    assert all(AclFilter().matches(b) for b in every)


@pytest.mark.parametrize(("args", "field"), [
    (("QUEUE", "t", "LITERAL", "User:a", "*", "READ", "ALLOW"), "resource_type"),
    (("TOPIC", "", "LITERAL", "User:a", "*", "READ", "ALLOW"), "resource_name"),
    (("TOPIC", "t", "MATCH", "User:a", "*", "READ", "ALLOW"), "pattern_type"),
    (("TOPIC", "t", "LITERAL", "alice", "*", "READ", "ALLOW"), "principal"),
    (("TOPIC", "t", "LITERAL", "User:a", "localhost", "READ", "ALLOW"), "host"),
    (("TOPIC", "t", "LITERAL", "User:a", "*", "ANY", "ALLOW"), "operation"),
    (("TOPIC", "t", "LITERAL", "User:a", "*", "READ", "MAYBE"), "permission"),
    (("CLUSTER", "c", "LITERAL", "User:a", "*", "ALTER", "ALLOW"), "resource_name"),
])
def test_a_bad_binding_names_its_field(args, field):
    with pytest.raises(AclError, match=f"^{field}:"):
        make_binding(*args)
