"""Every Kafka 4.x topic config (issue 53, item 1): accepted at create and alter by real
admin clients, type-checked with Kafka's own error wording, described with its source and
default; the broker resource described as a Kafka 4 node describes it (what kafka-python's
own integration test asks)."""

from __future__ import annotations

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, NewTopic
from kafka.admin import ConfigResource as KpConfigResource
from kafka.admin import ConfigResourceType, KafkaAdminClient
from kafka.admin import NewTopic as KpNewTopic
from kafka.errors import InvalidConfigurationError

# Kafka 4.1's topic configs (TopicConfig and LogConfig), each with a valid value that is
# not its default, as a tool would set them. cleanup.policy, min.insync.replicas,
# message.timestamp.type and remote.storage.enable have one behaviour here (docs/broker.md).
KAFKA_4_TOPIC_CONFIGS = {
    "retention.ms": "3600000", "retention.bytes": "10485760",
    "max.message.bytes": "2097152", "segment.bytes": "1048576", "segment.ms": "600000",
    "segment.jitter.ms": "1000", "segment.index.bytes": "1048576",
    "index.interval.bytes": "8192", "compression.type": "zstd",
    "delete.retention.ms": "1000", "min.compaction.lag.ms": "10",
    "max.compaction.lag.ms": "600000", "min.cleanable.dirty.ratio": "0.1",
    "file.delete.delay.ms": "1000", "flush.messages": "100", "flush.ms": "1000",
    "preallocate": "true", "compression.gzip.level": "5", "compression.lz4.level": "3",
    "compression.zstd.level": "-5", "message.timestamp.before.max.ms": "86400000",
    "message.timestamp.after.max.ms": "60000", "unclean.leader.election.enable": "true",
    "leader.replication.throttled.replicas": "0:0",
    "follower.replication.throttled.replicas": "*", "local.retention.ms": "60000",
    "local.retention.bytes": "1048576", "remote.log.copy.disable": "true",
    "remote.log.delete.on.disable": "true",
}
KAFKA_4_DEFAULTS = {"file.delete.delay.ms": "60000", "flush.ms": "9223372036854775807",
                    "preallocate": "false", "local.retention.ms": "-2",
                    "message.timestamp.after.max.ms": "3600000", "retention.bytes": "-1",
                    "compression.lz4.level": "9", "remote.storage.enable": "false"}


def test_every_kafka_4_topic_config_is_accepted_and_described(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("k4-every", 1, 1, config=KAFKA_4_TOPIC_CONFIGS),
                         NewTopic("k4-plain", 1, 1)])["k4-every"].result(timeout=30)
    (every,) = admin.describe_configs([ConfigResource("topic", "k4-every")]).values()
    got = every.result(timeout=30)
    for name, value in KAFKA_4_TOPIC_CONFIGS.items():
        assert (got[name].value, got[name].source) == (
            value, ConfigSource.DYNAMIC_TOPIC_CONFIG.value), name
    (plain,) = admin.describe_configs([ConfigResource("topic", "k4-plain")]).values()
    got = plain.result(timeout=30)
    assert set(got) >= set(KAFKA_4_TOPIC_CONFIGS)
    for name, value in KAFKA_4_DEFAULTS.items():
        assert (got[name].value, got[name].source) == (
            value, ConfigSource.DEFAULT_CONFIG.value), name
    # altered one at a time by kafka-python, back to the default by deleting it
    kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        kp.alter_configs([KpConfigResource(ConfigResourceType.TOPIC, "k4-plain",
                                           configs={"flush.messages": "7",
                                                    "file.delete.delay.ms": "5"})])
        described = kp.describe_configs(
            [KpConfigResource(ConfigResourceType.TOPIC, "k4-plain")])["topic"]["k4-plain"]
        assert described["flush.messages"]["value"] == "7"
        assert described["flush.messages"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
        assert described["file.delete.delay.ms"]["config_type"] == "LONG"
        assert "retention.bytes" not in described  # 'modified' leaves out the defaults
    finally:
        kp.close()


@pytest.mark.parametrize(("configs", "message"), [
    ({"flush.ms": "soon"}, "Invalid value soon for configuration flush.ms: Not a number of "
                           "type LONG"),
    ({"file.delete.delay.ms": "-1"}, "Invalid value -1 for configuration "
                                     "file.delete.delay.ms: Value must be at least 0"),
    ({"segment.index.bytes": "3000000000"}, "Not a number of type INT"),
    ({"preallocate": "maybe"}, "Expected value to be either true or false"),
    ({"min.cleanable.dirty.ratio": "1.5"}, "Value must be no more than 1"),
    ({"compression.gzip.level": "10"}, "Value must be between 1 and 9 or -1"),
    ({"message.timestamp.type": "Sometime"}, "message.timestamp.type"),
    ({"leader.replication.throttled.replicas": "all"}, "[partitionId]:[brokerId]"),
    ({"message.format.version": "3.0"}, "Unknown topic config name: message.format.version"),
    ({"remote.storage.enable": "true"}, "Tiered Storage functionality is disabled"),
])
def test_bad_values_are_refused_with_kafkas_errors(broker, configs, message):
    kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        with pytest.raises(InvalidConfigurationError) as refused:
            kp.create_topics([KpNewTopic("k4-bad", 1, 1, topic_configs=configs)])
        assert message in str(refused.value)
    finally:
        kp.close()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    (future,) = admin.create_topics([NewTopic("k4-bad", 1, 1, config=configs)]).values()
    with pytest.raises(ck.KafkaException) as refused_ck:
        future.result(timeout=30)
    assert refused_ck.value.args[0].code() == ck.KafkaError.INVALID_CONFIG


def test_the_broker_resource_is_described_as_a_kafka_4_node_does(broker):
    """As kafka-python's own test asks of Kafka 4: advertised.listeners is a static,
    read-only broker config, with no synonyms when none are asked for."""
    kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        every = kp.describe_configs([KpConfigResource(ConfigResourceType.BROKER, 0)],
                                    config_filter="all")["broker"]["0"]
        listeners = every["advertised.listeners"]
        assert listeners["config_source"] == "STATIC_BROKER_CONFIG"
        assert listeners["read_only"] is True and listeners["is_sensitive"] is False
        assert listeners["synonyms"] == [] and listeners["config_type"] in ("LIST", "STRING")
        assert listeners["value"].endswith(broker.bootstrap)
        # each topic config's broker-wide default is described under Kafka's name
        assert every["log.segment.delete.delay.ms"]["value"] == "60000"
        assert every["log.flush.interval.messages"]["value"] == "9223372036854775807"
        assert every["log.cleaner.min.cleanable.ratio"]["value"] == "0.5"
    finally:
        kp.close()
