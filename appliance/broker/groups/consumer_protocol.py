"""The consumer protocol inside JoinGroup/SyncGroup: what a member subscribes to.

The coordinator relays member metadata and assignments as opaque bytes (the assignor runs
in the group's leader), but for groups of protocol type ``consumer`` it reads the
subscription, as Kafka does, to know which topics a group reads: growing one of them
rebalances the group, and OffsetDelete refuses to drop offsets of a topic the group still
subscribes to. Bytes that do not parse mean "subscribes to nothing we know of", never an
error: they are the client's business.
"""

from __future__ import annotations

from appliance.broker.wire.codec import Array, DecodeError, Field, Reader
from appliance.broker.wire.codegen import decode_struct

PROTOCOL_TYPE = "consumer"
_KNOWN_VERSION = 3  # newer versions only append fields: read the ones we know

F = Field
SUBSCRIPTION = [
    F("topics", Array("string")),
    F("user_data", "nbytes"),
    F("owned_partitions", Array([
        F("topic", "string"),
        F("partitions", Array("int32")),
    ]), 1),
    F("generation_id", "int32", 2, default=-1),
    F("rack_id", "nstring", 3),
]


def subscribed_topics(metadata: bytes) -> frozenset[str]:
    """Topics named by a consumer-protocol subscription; empty if it does not parse."""
    r = Reader(metadata)
    try:
        version = r.int16()
        if version < 0:
            return frozenset()
        sub = decode_struct(SUBSCRIPTION, r, min(version, _KNOWN_VERSION), False,
                            "ConsumerProtocolSubscription")
    except DecodeError:
        return frozenset()
    return frozenset(sub["topics"] or ())
