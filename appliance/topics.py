"""Kafka-side facts the appliance needs before it starts: topics exist, partition counts,
end offsets. Uses kafka-python (the appliance's own Python client), not Spark.

On the embedded broker missing topics are created; on an external cluster a missing
topic is an error that names it (creating topics there is the operator's decision).
"""

from __future__ import annotations

from collections.abc import Iterable

from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.admin import NewTopic

from appliance.config import KafkaConfig, TopicsConfig

# Partitions of each [topics] entry when the appliance (or a test/bench) creates it.
DEFAULT_PARTITIONS = {"events": 2, "alerts": 1, "dead_letters": 1}


class TopicError(Exception):
    """A topic problem an operator must fix (one line)."""


def client_config(kafka: KafkaConfig, bootstrap: str) -> dict:
    """kafka-python keyword arguments: the bootstrap, the pass-through properties
    kafka-python understands (``security.protocol`` -> ``security_protocol``), and the
    security settings translated by ``client_security`` (SASL credentials from
    ``sasl.jaas.config``, a PEM truststore as ``ssl_cafile``)."""
    known = set(KafkaAdminClient.DEFAULT_CONFIG)
    out: dict = {"bootstrap_servers": bootstrap.split(","), "request_timeout_ms": 15000}
    for key, value in kafka.properties.items():
        name = key.replace(".", "_")
        if name in known:
            out[name] = value
    out.update(kafka.security.kafka_python())
    return out


def offsets_consumer(config: dict) -> KafkaConsumer:
    """A consumer outside any group, for metadata and end offsets. Auto-commit is off
    because there is no group to commit to: left on, kafka-python turns it off itself and
    warns so at every start, a line with no stable event name in the appliance's log."""
    return KafkaConsumer(**{**config, "group_id": None, "enable_auto_commit": False})


def default_partitions(topics: TopicsConfig) -> dict[str, int]:
    """Topic name -> partitions to create it with, for the configured topic names."""
    return {getattr(topics, field): n for field, n in DEFAULT_PARTITIONS.items()}


def partition_counts(config: dict, topics: Iterable[str]) -> dict[str, int]:
    """Partitions per topic; 0 for a topic the cluster does not have."""
    consumer = offsets_consumer(config)
    try:
        return {t: len(consumer.partitions_for_topic(t) or ()) for t in topics}
    finally:
        consumer.close()


def ensure_topics(config: dict, wanted: dict[str, int], create: bool) -> dict[str, int]:
    """Make sure every topic in ``wanted`` (name -> partitions if created) exists.

    Returns the actual partition counts. ``create=False`` (external cluster) raises
    TopicError naming the missing topics instead of creating them.
    """
    counts = partition_counts(config, wanted)
    missing = [t for t, n in counts.items() if n == 0]
    if missing and not create:
        raise TopicError(f"topics missing on the Kafka cluster: {', '.join(missing)} "
                         f"(create them, or fix [topics] in the config)")
    if missing:
        admin = KafkaAdminClient(**config)
        try:
            admin.create_topics([NewTopic(t, wanted[t], 1) for t in missing],
                                raise_errors=False)
        finally:
            admin.close()
        counts = partition_counts(config, wanted)
        still = [t for t, n in counts.items() if n == 0]
        if still:
            raise TopicError(f"could not create topics: {', '.join(still)}")
    return counts


def end_offsets(consumer: KafkaConsumer, topics: Iterable[str]) -> dict[str, dict[int, int]]:
    """Latest offset per partition of each topic, in one request (empty for an unknown
    topic)."""
    out: dict[str, dict[int, int]] = {t: {} for t in topics}
    tps = [TopicPartition(t, p) for t in out
           for p in sorted(consumer.partitions_for_topic(t) or ())]
    if tps:
        for tp, offset in consumer.end_offsets(tps).items():
            out[tp.topic][tp.partition] = offset
    return out
