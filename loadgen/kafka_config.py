"""librdkafka (confluent-kafka) settings tuned for latency, in one place.

confluent-kafka is used at run time because it releases the GIL inside librdkafka and is
far faster than kafka-python; the settings below trade throughput for latency: no
batching delay on produce, and fetches that return as soon as one byte is there.
"""

from __future__ import annotations


def producer_config(bootstrap: str, linger_ms: float = 0.0) -> dict:
    return {
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


def consumer_config(bootstrap: str, fetch_wait_ms: int = 5) -> dict:
    return {
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


def admin_config(bootstrap: str) -> dict:
    return {"bootstrap.servers": bootstrap, "client.id": "loadgen-admin", "log_level": 2}
