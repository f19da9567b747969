"""librdkafka (confluent-kafka) settings tuned for latency, in one place.

Security (TLS, SASL) comes from the same ``[kafka]`` settings the appliance reads
(``appliance.client_security``), loaded from the file given by ``--kafka-config`` or the
``LOADGEN_KAFKA_CONFIG`` environment variable (Locust), plus ``APPLIANCE_KAFKA_*``
environment overrides: never from the command line.

confluent-kafka is used at run time because it releases the GIL inside librdkafka and is
far faster than kafka-python; the settings below trade throughput for latency: no
batching delay on produce, and fetches that return as soon as one byte is there.
"""

from __future__ import annotations

import os

from appliance.client_security import ClientSecurity
from appliance.config import ConfigError as ApplianceConfigError
from appliance.config import load_config

CONFIG_ENV = "LOADGEN_KAFKA_CONFIG"
PLAINTEXT = ClientSecurity()


class KafkaConfigError(ValueError):
    """The Kafka settings file is unusable (one line naming file and key, no secrets)."""


def load_security(path: str | None, environ: dict[str, str] | None = None) -> ClientSecurity:
    """The security settings of ``path``'s ``[kafka]`` table (an ``appliance.toml`` works
    as it is), with ``APPLIANCE_KAFKA_*`` overrides; plaintext when no file is given."""
    environ = dict(os.environ if environ is None else environ)
    path = path or environ.get(CONFIG_ENV) or None
    if path is None:
        return PLAINTEXT
    try:
        return load_config(path, environ=environ).kafka.security
    except ApplianceConfigError as exc:
        raise KafkaConfigError(str(exc)) from None


def producer_config(bootstrap: str, linger_ms: float = 0.0,
                    security: ClientSecurity = PLAINTEXT) -> dict:
    return {
        **security.librdkafka(),
        "bootstrap.servers": bootstrap,
        "client.id": "loadgen-producer",
        "linger.ms": linger_ms,
        "acks": "all",
        "enable.idempotence": False,
        "socket.nagle.disable": True,
        "queue.buffering.max.messages": 1_000_000,
        "queue.buffering.max.kbytes": 1_048_576,
        "message.timeout.ms": 10_000,
        "delivery.report.only.error": True,
        "log_level": 2,
    }


def consumer_config(bootstrap: str, fetch_wait_ms: int = 5,
                    security: ClientSecurity = PLAINTEXT) -> dict:
    return {
        **security.librdkafka(),
        "bootstrap.servers": bootstrap,
        "client.id": "loadgen-consumer",
        "group.id": "loadgen-collector",  # required by librdkafka; offsets are never committed
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": False,
        "fetch.wait.max.ms": fetch_wait_ms,
        "fetch.min.bytes": 1,
        "fetch.error.backoff.ms": 10,
        "fetch.queue.backoff.ms": 0,
        "socket.nagle.disable": True,
        "log_level": 2,
    }


def admin_config(bootstrap: str, security: ClientSecurity = PLAINTEXT) -> dict:
    return {**security.librdkafka(), "bootstrap.servers": bootstrap,
            "client.id": "loadgen-admin", "log_level": 2}
