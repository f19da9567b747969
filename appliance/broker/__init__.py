"""The embedded single-node Kafka-protocol broker (``appliance broker``)."""

from __future__ import annotations

from appliance.broker.embedded import EmbeddedBroker

__all__ = ["EmbeddedBroker"]
