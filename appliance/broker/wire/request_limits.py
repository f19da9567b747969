"""How big a request may be, per API: its frame, and its arrays' items decoded.

A request's cost to the broker is bounded by its frame (the bytes buffered until it is
whole) and by its items (decoded, each array item is a Python dict or value: a
Metadata request of 10-byte topic entries inflates about 40-fold). Kafka bounds only the
frame (``socket.request.max.bytes``, 100 MiB, for every API); here only Produce, whose
frames carry records, may be that large, and the rest are sized to what real clients
send (a consumer's fetch of thousands of partitions, a group's assignments), with an
item cap for all. A request over a limit closes its connection, logged with the limit
(``broker.connection_closed``): a client that sends one is not a Kafka client.
"""

from __future__ import annotations

from dataclasses import dataclass

from appliance.broker.settings import BrokerConfig
from appliance.broker.wire import schemas

DEFAULT_FRAME_BYTES = 1024 * 1024
MAX_ITEMS = 10_000  # array items in one request, all arrays together
GROUP_FRAME_SLACK = 64 * 1024  # JoinGroup/SyncGroup: the group metadata cap and this


@dataclass(frozen=True)
class RequestLimits:
    produce_frame_bytes: int  # socket.request.max.bytes
    group_frame_bytes: int
    other_frame_bytes: int = DEFAULT_FRAME_BYTES
    max_items: int = MAX_ITEMS

    @classmethod
    def from_config(cls, config: BrokerConfig) -> RequestLimits:
        return cls(produce_frame_bytes=config.max_frame_bytes,
                   group_frame_bytes=config.group_max_metadata_bytes + GROUP_FRAME_SLACK)

    @property
    def largest_frame(self) -> int:
        return max(self.produce_frame_bytes, self.group_frame_bytes, self.other_frame_bytes)

    def frame_bytes(self, api_key: int) -> int:
        if api_key == schemas.PRODUCE.key:
            return self.produce_frame_bytes
        if api_key in (schemas.JOIN_GROUP.key, schemas.SYNC_GROUP.key):
            return self.group_frame_bytes
        return self.other_frame_bytes
