"""Admin tools' calls with real clients: groups (list, describe, delete, offsets), topic and
broker configs, DeleteRecords, DescribeCluster; and the Java transactional producer (the rest of
transactions: ``test_transactions``)."""

from __future__ import annotations

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)
from kafka import TopicPartition
from kafka.admin import ConfigResource as KpConfigResource
from kafka.admin import ConfigResourceType, KafkaAdminClient

from support.broker.group_harness import (
    Members,
    all_consumed,
    high_watermarks,
    partitioned,
    produce_round,
    python_member,
    wait_until,
)
from support.broker.java_programs import run_java


def _active_group(broker, tmp_path, topic: str, group: str) -> Members:
    broker.create_topics({topic: 6})
    produce_round(broker.bootstrap, topic, 10, "admin")
    m = Members(python_member("kafka-python", broker.bootstrap, topic, group, "range",
                              count=2), "admin-members", tmp_path, count=2)
    wait_until("2 members to share the topic", lambda: partitioned(m.owned(), 2), 90, m.tail)
    hwm = high_watermarks(broker.bootstrap, topic)
    wait_until("the records to be consumed", lambda: all_consumed([m], hwm), 60, m.tail)
    return m


def test_kafka_python_admin_client_groups_and_topic_configs(group_broker, tmp_path):
    topic, group = "kp-admin", "kp-admin-group"
    admin = KafkaAdminClient(bootstrap_servers=group_broker.bootstrap)
    members = _active_group(group_broker, tmp_path, topic, group)
    try:
        listed = {g["group_id"]: g for g in admin.list_groups()}
        assert listed[group]["group_state"] == "Stable"
        described = admin.describe_groups([group])[group]
        assert described["group_state"] == "Stable"
        assert described["protocol_data"] == "range"
        owned = sorted(p for m in described["members"]
                       for a in m["member_assignment"]["assigned_partitions"]
                       for p in a["partitions"])
        assert owned == list(range(6)) and len(described["members"]) == 2
        offsets = admin.list_group_offsets({group: None})[group]
        assert {tp.partition: om.offset for tp, om in offsets.items()} == {
            p: 10 for p in range(6)}
        refused = admin.delete_groups([group])[group]
        assert refused != "OK" and "NonEmptyGroup" in str(refused)
    finally:
        members.stop()
    assert admin.describe_groups([group])[group]["group_state"] == "Empty"
    assert admin.delete_groups([group]) == {group: "OK"}
    assert group not in {g["group_id"] for g in admin.list_groups()}

    # topic configs: described, altered (incrementally: the broker advertises it)
    resource = KpConfigResource(ConfigResourceType.TOPIC, topic)
    result = admin.alter_configs([KpConfigResource(ConfigResourceType.TOPIC, topic,
                                                   configs={"retention.ms": "7200000"})])
    assert result == {"topic": {topic: "OK"}}
    got = admin.describe_configs([resource], config_filter="all")["topic"][topic]
    assert got["retention.ms"]["value"] == "7200000"
    assert got["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert got["max.message.bytes"]["config_source"] == "DEFAULT_CONFIG"
    modified = admin.describe_configs([resource])["topic"][topic]  # default: modified only
    assert set(modified) == {"retention.ms"}
    broker_cfg = admin.describe_configs([KpConfigResource(ConfigResourceType.BROKER, "0")],
                                        config_filter="all")["broker"]["0"]
    assert broker_cfg["num.partitions"]["value"] == "1"
    assert admin.delete_records({TopicPartition(topic, 0): 4})[
        TopicPartition(topic, 0)]["low_watermark"] == 4
    cluster = admin.describe_cluster()
    assert cluster["cluster_id"] == "appliance-embedded" and len(cluster["brokers"]) == 1
    admin.close()


def test_confluent_admin_client_groups_and_topic_configs(group_broker, tmp_path):
    topic, group = "ck-admin", "ck-admin-group"
    admin = AdminClient({"bootstrap.servers": group_broker.bootstrap})
    members = _active_group(group_broker, tmp_path, topic, group)
    try:
        listed = admin.list_consumer_groups().result(timeout=30)
        states = {g.group_id: g.state.name for g in listed.valid}
        assert states[group] == "STABLE"
        d = admin.describe_consumer_groups([group])[group].result(timeout=30)
        assert d.state.name == "STABLE" and d.partition_assignor == "range"
        assert sorted(tp.partition for m in d.members for tp in m.assignment.topic_partitions
                      ) == list(range(6))
        with pytest.raises(ck.KafkaException, match="NON_EMPTY_GROUP"):
            admin.delete_consumer_groups([group])[group].result(timeout=30)
    finally:
        members.stop()
    admin.delete_consumer_groups([group])[group].result(timeout=30)

    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("retention.bytes", "123456",
                    incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(timeout=30)
    described = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)])
    (future,) = described.values()
    entries = future.result(timeout=30)
    assert entries["retention.bytes"].value == "123456"
    assert entries["cleanup.policy"].value == "delete"
    bad = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("cleanup.policy", "shrink", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(ck.KafkaException, match="INVALID_CONFIG"):
        admin.incremental_alter_configs([bad])[bad].result(timeout=30)
    cluster = admin.describe_cluster().result(timeout=30)
    assert cluster.cluster_id == "appliance-embedded" and len(cluster.nodes) == 1


@pytest.mark.java
def test_java_admin_client_and_a_transactional_producer(group_broker, java_checks):
    group_broker.create_topics({"java-admin-txn": 1})
    out = run_java(java_checks, "AdminCheck", group_broker.bootstrap, "java-admin",
                   "java-admin-group", timeout=180)
    assert out["CLUSTER"] == "appliance-embedded,1,0"
    assert out["TOPIC_RETENTION_MS"] == "7200000,DYNAMIC_TOPIC_CONFIG"
    assert out["TOPIC_MAX_MESSAGE_BYTES"] == "500000"
    assert out["TOPIC_CLEANUP_POLICY"] == "delete,false"
    assert out["BAD_POLICY_REFUSED"] == "InvalidConfigurationException"
    assert out["BROKER_NUM_PARTITIONS"] == "1,true"
    assert out["DELETE_RECORDS"] == "8,8"
    assert int(out["CONSUMED"]) >= 12
    assert out["LISTED_STATE"] == "Stable"
    assert out["DESCRIBED"] == "Stable,2,2,range"
    assert out["GROUP_OFFSETS"].startswith("20,")
    assert out["DELETE_ACTIVE"] == "GroupNotEmptyException"
    assert out["OFFSET_DELETED"] == "true"
    assert out["GROUP_DELETED"] == "true"
    assert out["TXN_ERROR"] == "none"
    assert out["TXN_COMMITTED"] == "c0,c1,c2"  # the aborted "a" is never seen
