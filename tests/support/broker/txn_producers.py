"""What the transaction tests share: names no other test's transactional id or topic
collides with on a module's shared broker, and a librdkafka transactional producer
already past init_transactions (its producer id and epoch fenced in)."""

from __future__ import annotations

import uuid

import confluent_kafka as ck


def unique_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def txn_producer(bootstrap: str, txn_id: str, **extra) -> ck.Producer:
    p = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
                     "linger.ms": 5, **extra})
    p.init_transactions(30)
    return p
