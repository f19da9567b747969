"""The embedded single-node Kafka-protocol broker (``appliance broker``).

Why our own: Apache Kafka is not installable here, and the one Kafka-protocol broker that
is (Tansu) was measured unfit: its fetch waits out ``fetch.max.wait.ms`` even when data is
ready, and its high watermark under-reports after multi-record batches. This one speaks
exactly what the appliance's clients need - Java kafka-clients 3.9 (the Spark connector),
kafka-python, librdkafka - and puts produce->consume latency first: a waiting fetch is
woken by the produce itself.

APIs (advertised versions): Produce 3-9, Fetch 4-12 (topics by name), ListOffsets 1-6,
Metadata 1-12, OffsetCommit 0-7, OffsetFetch 0-5, FindCoordinator 0-4 (groups only),
ApiVersions 0-3 (unknown versions answered in v0), CreateTopics 0-5, DeleteTopics 0-5,
InitProducerId 0-4 (idempotent producers; no transactions), CreatePartitions 0-3.
Group membership (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, DescribeGroups,
ListGroups) is answered with COORDINATOR_NOT_AVAILABLE, never advertised: use assign().
SaslHandshake 1 and SaslAuthenticate 0-2 serve SASL listeners (PLAIN, SCRAM-SHA-256/512).

Modules: ``server`` (TCP, ordering), ``apis`` (handlers), ``schemas``/``codec``/``codegen``
(wire format), ``partition``/``records``/``producer_state`` (the log), ``segments``
(durability), ``topics``, ``fetch_wait``, ``group_offsets``, ``embedded`` (subprocess
helper for Python), ``wire_client`` (tiny protocol client), ``cli``; security:
``listener`` (what each security protocol demands), ``tls``, ``sasl`` (per-connection
gate), ``scram``, ``credentials`` (the users file), ``users_cli`` (``broker-user add``).
"""

from __future__ import annotations

from appliance.broker.embedded import EmbeddedBroker

__all__ = ["EmbeddedBroker"]
