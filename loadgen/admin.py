"""Broker checks before a run: is it reachable, and do the topics exist (else create them)."""

from __future__ import annotations

from appliance.client_security import ClientSecurity
from appliance.logs import get_logger
from loadgen.collector import BrokerUnavailable
from loadgen.config import LoadConfig
from loadgen.kafka_config import PLAINTEXT

log = get_logger("loadgen.admin")


def check_broker(bootstrap: str, timeout: float = 5.0,
                 security: ClientSecurity = PLAINTEXT) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    from loadgen.kafka_config import admin_config

    try:
        AdminClient(admin_config(bootstrap, security)).list_topics(timeout=timeout)
    except KafkaException as exc:
        raise BrokerUnavailable(f"cannot reach a Kafka broker at {bootstrap}: {exc}") from exc


def ensure_topics(config: LoadConfig, topics: list[str], timeout: float = 10.0) -> None:
    """Create missing topics (the broker may also auto-create); fail if one stays missing."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    from loadgen.kafka_config import admin_config

    admin = AdminClient(admin_config(config.bootstrap, config.security))
    existing = admin.list_topics(timeout=timeout).topics
    missing = [t for t in topics if t not in existing or existing[t].error is not None]
    if not missing:
        return
    futures = admin.create_topics(
        [NewTopic(t, num_partitions=config.topic_partitions, replication_factor=1)
         for t in missing], operation_timeout=timeout)
    for topic, future in futures.items():
        try:
            future.result(timeout=timeout)
            log.info("topic.created", topic=topic, partitions=config.topic_partitions)
        except KafkaException as exc:
            if "TOPIC_ALREADY_EXISTS" not in str(exc):
                raise BrokerUnavailable(f"cannot create topic {topic!r}: {exc}") from exc
