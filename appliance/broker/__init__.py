"""The embedded single-node Kafka-protocol broker (``appliance broker``).

Why our own: Apache Kafka is not installable here, and the one Kafka-protocol broker that
is (Tansu) was measured unfit: its fetch waits out ``fetch.max.wait.ms`` even when data is
ready, and its high watermark under-reports after multi-record batches. This one speaks
what the appliance's clients need - Java kafka-clients 3.9 (the Spark connector),
kafka-python, librdkafka - and what the alerts' downstream consumers and admin tools call
(consumer groups, committed offsets, configs), and puts produce->consume latency first: a
waiting fetch is woken by the produce itself.

Built to run unattended for months against hostile clients: its memory is bounded and
stated (the memory_bound module; records are served from segment files, not held), the log has a
retention by default (time, and a budget sized to the disk or RAM), and every request's
cost is bounded (one request at a time per connection, frames and items sized to the
API, CRC-32C checked on produce, decompression capped, walks sliced; docs/broker.md).

APIs (advertised versions; the full table with what is not served and why is in
docs/broker.md): Produce 3-9, Fetch 4-12 (topics by name), ListOffsets 1-10, Metadata 1-12,
ApiVersions 0-3 (unknown versions answered in v0), CreateTopics 0-5, DeleteTopics 0-5,
CreatePartitions 0-3, InitProducerId 0-4 (idempotent and transactional producers),
DeleteRecords 0-2,
DescribeConfigs 0-4, AlterConfigs 0-2, IncrementalAlterConfigs 0-1, DescribeCluster 0-2;
one node's answers to DescribeLogDirs 0-4, DescribeTopicPartitions 0, ListConfigResources
0-1, ElectLeaders 0-2, Alter/ListPartitionReassignments 0; SCRAM users through
Describe/AlterUserScramCredentials 0;
consumer groups of the classic protocol: FindCoordinator 0-4, JoinGroup 0-9, SyncGroup 0-5,
Heartbeat 0-4, LeaveGroup 0-5, OffsetCommit 0-9, OffsetFetch 0-9, DescribeGroups 0-5,
ListGroups 0-5, DeleteGroups 0-2, OffsetDelete 0, and of KIP-848's consumer protocol:
ConsumerGroupHeartbeat 0-1, ConsumerGroupDescribe 0-1 (the broker assigns); SaslHandshake
0-1 and SaslAuthenticate 0-2 serve SASL listeners (PLAIN, SCRAM-SHA-256/512); DescribeAcls,
CreateAcls, DeleteAcls 0-3 manage Kafka ACLs, enforced with ``--authorizer acl``;
transactions (KIP-98, KIP-447): AddPartitionsToTxn 0-3, AddOffsetsToTxn 0-3, EndTxn 0-3,
TxnOffsetCommit 0-3, and ``read_committed`` fetches up to the last stable offset; what
``kafka-transactions`` asks: ListTransactions 0-2, DescribeTransactions 0,
DescribeProducers 0.

Rooms, top to bottom (each a layer of the ``broker`` import contract in pyproject.toml,
and each sub-package under a contract of its own):

- ``embedded`` (run the broker as a child process from Python; ``EmbeddedBroker``) and
  ``users_cli`` (``appliance broker-user``: the users file, and ``broker-user acl``);
- ``cli`` (``appliance broker``: flags, start-up, signals);
- ``server`` (TCP: the listeners, and each connection wiring its pieces together);
- ``apis`` (the log's, topics' and cluster's handlers, and the dispatch table),
  ``broker_metrics`` (``broker_*`` for Prometheus, ``--metrics-port``) and
  ``memory_bound`` (the memory formula, and the write-side constants it rests on);
- ``admin_apis`` (configs and DeleteRecords), ``cluster_apis`` (log dirs, topic
  partitions, config resources, elections, reassignments), ``scram_apis`` (SCRAM users),
  ``groups/`` (consumer groups: ``apis``, ``coordinator``, ``consumer_groups``,
  ``consumer_protocol``, ``offsets``, ``assignors``, ``timers``,
  ``group_cap``), ``txn/`` (transactions: ``apis``,
  ``admin_apis``, ``coordinator``, ``state_store``) and ``connections/`` (one connection's pieces:
  ``dispatch``, ``responses``, ``framing``, ``auth_steps``, ``read_gate``; and what one
  client address may cost: the per-IP and broker-wide ``cap``, the per-IP ``rate``, the
  ``preauth_queue``, the ``request_pool``);
- ``acl/`` (authorization: ``apis``, ``cli``, ``authorizer``, ``needs``, ``store``,
  ``model``) and ``security/`` (authentication: ``listener``, ``sasl``, ``tls``,
  ``credentials``, ``password_pool``, ``scram``);
- ``storage/`` (the log: ``log_cleaner``, ``topic_registry``, ``fetch_wait``,
  ``timestamp_search``, ``partition``, ``segments``, ``batch_policy``, ``topic_configs``,
  ``log_budget``, ``cleaned_swap``, ``segment_file``, ``framed_scan``,
  ``producer_state``, ``producer_ids``, ``cleaner``, ``partition_txns``, ``memory_log``,
  ``offset_index``, ``json_lines``,
  ``batch_scan``, ``compact_batch``, ``durable_io``);
- ``wire/`` (Kafka's wire format: ``client``, ``request_limits``, ``schemas``,
  ``codegen``, ``control_batch``, ``codec``, ``errors``, ``records``, ``compression``);
- at the bottom, what every room may use: ``settings`` (``BrokerConfig``), ``caller``
  (who sent a request), ``toml_file`` (reading an operator's TOML file), ``ready_line``
  (waiting for a child's ready line) and ``slices`` (long work a slice at a time).
"""

from __future__ import annotations

from appliance.broker.embedded import EmbeddedBroker

__all__ = ["EmbeddedBroker"]
