"""The embedded single-node Kafka-protocol broker (``appliance broker``).

Why our own: Apache Kafka is not installable here, and the one Kafka-protocol broker that
is (Tansu) was measured unfit: its fetch waits out ``fetch.max.wait.ms`` even when data is
ready, and its high watermark under-reports after multi-record batches. This one speaks
what the appliance's clients need - Java kafka-clients 3.9 (the Spark connector),
kafka-python, librdkafka - and what the alerts' downstream consumers and admin tools call
(consumer groups, committed offsets, configs), and puts produce->consume latency first: a
waiting fetch is woken by the produce itself.

APIs (advertised versions; the full table with what is not served and why is in
docs/broker.md): Produce 3-9, Fetch 4-12 (topics by name), ListOffsets 1-6, Metadata 1-12,
ApiVersions 0-3 (unknown versions answered in v0), CreateTopics 0-5, DeleteTopics 0-5,
CreatePartitions 0-3, InitProducerId 0-4 (idempotent producers), DeleteRecords 0-2,
DescribeConfigs 0-4, AlterConfigs 0-2, IncrementalAlterConfigs 0-1, DescribeCluster 0-2;
consumer groups (the classic protocol): FindCoordinator 0-4, JoinGroup 0-9, SyncGroup 0-5,
Heartbeat 0-4, LeaveGroup 0-5, OffsetCommit 0-8, OffsetFetch 0-8, DescribeGroups 0-5,
ListGroups 0-5, DeleteGroups 0-2, OffsetDelete 0; SaslHandshake 0-1 and SaslAuthenticate 0-2
serve SASL listeners (PLAIN, SCRAM-SHA-256/512); DescribeAcls, CreateAcls, DeleteAcls 0-3
manage Kafka ACLs, enforced with ``--authorizer acl``. Transactions are refused at once with
TRANSACTIONAL_ID_AUTHORIZATION_FAILED (FindCoordinator for a transactional id,
InitProducerId with one, and the transaction APIs, which are not advertised).

Rooms, top to bottom (each a layer of the ``broker`` import contract in pyproject.toml,
and each sub-package under a contract of its own):

- ``embedded`` (run the broker as a child process from Python; ``EmbeddedBroker``) and
  ``users_cli`` (``appliance broker-user``: the users file, and ``broker-user acl``);
- ``cli`` (``appliance broker``: flags, start-up, signals);
- ``server`` (TCP: framing, header parsing, dispatch, in-order responses per connection);
- ``apis`` (the log's, topics' and cluster's handlers, and the dispatch table) and
  ``broker_metrics`` (``broker_*`` for Prometheus, ``--metrics-port``);
- ``admin_apis`` (configs and DeleteRecords) and ``groups/`` (consumer groups: ``apis``,
  ``coordinator``, ``consumer_protocol``, ``offsets``);
- ``acl/`` (authorization: ``apis``, ``cli``, ``authorizer``, ``needs``, ``store``,
  ``model``), ``security/`` (authentication: ``listener``, ``sasl``, ``tls``,
  ``credentials``, ``password_pool``, ``scram``) and ``connections/`` (per-IP ``cap`` and
  ``rate``, the ``preauth_queue``);
- ``storage/`` (the log: ``topic_registry``, ``fetch_wait``, ``partition``,
  ``segments``, ``producer_state``, ``topic_configs``, ``segment_scan``, ``durable_io``);
- ``wire/`` (Kafka's wire format: ``client``, ``schemas``, ``codegen``, ``codec``,
  ``errors``, ``records``);
- at the bottom, what every room may use: ``settings`` (``BrokerConfig``), ``caller``
  (who sent a request), ``toml_file`` (reading an operator's TOML file) and
  ``ready_line`` (waiting for a child's ready line).
"""

from __future__ import annotations

from appliance.broker.embedded import EmbeddedBroker

__all__ = ["EmbeddedBroker"]
