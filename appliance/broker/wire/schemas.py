"""Message schemas of the Kafka APIs this broker speaks, and the versions it advertises.

Field layouts follow the public Kafka protocol message definitions, one row per field with
the versions it exists in. ``ALL`` is what ApiVersions advertises, ``min_version..
max_version`` each; ``BY_KEY`` is everything the broker decodes. Fetch stops at v12 so
clients address topics by name, and Produce starts at v3 so every batch is a magic v2 record batch.
"""

from __future__ import annotations

from appliance.broker.wire.codec import Array, Field, Schema, Struct

F = Field

PRODUCE = Schema(
    0, "Produce", 3, 9, 9,
    request=[
        F("transactional_id", "nstring", 3),
        F("acks", "int16"),
        F("timeout_ms", "int32"),
        F("topic_data", Array([
            F("name", "string"),
            F("partition_data", Array([
                F("index", "int32"),
                F("records", "records"),
            ])),
        ])),
    ],
    response=[
        F("responses", Array([
            F("name", "string"),
            F("partition_responses", Array([
                F("index", "int32"),
                F("error_code", "int16"),
                F("base_offset", "int64"),
                F("log_append_time_ms", "int64", 2, default=-1),
                F("log_start_offset", "int64", 5, default=-1),
                F("record_errors", Array([
                    F("batch_index", "int32"),
                    F("batch_index_error_message", "nstring"),
                ]), 8),
                F("error_message", "nstring", 8),
            ])),
        ])),
        F("throttle_time_ms", "int32", 1),
    ],
)

FETCH = Schema(
    1, "Fetch", 4, 12, 12,
    request=[
        F("replica_id", "int32", 0, 14, default=-1),
        F("max_wait_ms", "int32"),
        F("min_bytes", "int32"),
        F("max_bytes", "int32", 3, default=0x7FFFFFFF),
        F("isolation_level", "int8", 4),
        F("session_id", "int32", 7),
        F("session_epoch", "int32", 7, default=-1),
        F("topics", Array([
            F("topic", "string", 0, 12),
            F("topic_id", "uuid", 13),
            F("partitions", Array([
                F("partition", "int32"),
                F("current_leader_epoch", "int32", 9, default=-1),
                F("fetch_offset", "int64"),
                F("last_fetched_epoch", "int32", 12, default=-1),
                F("log_start_offset", "int64", 5, default=-1),
                F("partition_max_bytes", "int32"),
            ])),
        ])),
        F("forgotten_topics_data", Array([
            F("topic", "string", 7, 12),
            F("topic_id", "uuid", 13),
            F("partitions", Array("int32")),
        ]), 7),
        F("rack_id", "string", 11),
    ],
    response=[
        F("throttle_time_ms", "int32", 1),
        F("error_code", "int16", 7),
        F("session_id", "int32", 7),
        F("responses", Array([
            F("topic", "string", 0, 12),
            F("topic_id", "uuid", 13),
            F("partitions", Array([
                F("partition_index", "int32"),
                F("error_code", "int16"),
                F("high_watermark", "int64"),
                F("last_stable_offset", "int64", 4, default=-1),
                F("log_start_offset", "int64", 5, default=-1),
                F("aborted_transactions", Array([
                    F("producer_id", "int64"),
                    F("first_offset", "int64"),
                ], nullable=True), 4),
                F("preferred_read_replica", "int32", 11, default=-1),
                F("records", "records"),
            ])),
        ])),
    ],
)

# v7: MAX_TIMESTAMP (-3, KIP-734); v8: EARLIEST_LOCAL (-4, KIP-405); v9: LATEST_TIERED
# (-5, KIP-1005); v10: a timeout for tiered lookups (KIP-1075), unused without tiers.
LIST_OFFSETS = Schema(
    2, "ListOffsets", 1, 10, 6,
    request=[
        F("replica_id", "int32"),
        F("isolation_level", "int8", 2),
        F("topics", Array([
            F("name", "string"),
            F("partitions", Array([
                F("partition_index", "int32"),
                F("current_leader_epoch", "int32", 4, default=-1),
                F("timestamp", "int64"),
                F("max_num_offsets", "int32", 0, 0, default=1),
            ])),
        ])),
        F("timeout_ms", "int32", 10, default=0),
    ],
    response=[
        F("throttle_time_ms", "int32", 2),
        F("topics", Array([
            F("name", "string"),
            F("partitions", Array([
                F("partition_index", "int32"),
                F("error_code", "int16"),
                F("old_style_offsets", Array("int64"), 0, 0),
                F("timestamp", "int64", 1, default=-1),
                F("offset", "int64", 1, default=-1),
                F("leader_epoch", "int32", 4, default=-1),
            ])),
        ])),
    ],
)

METADATA = Schema(
    3, "Metadata", 1, 12, 9,
    request=[
        F("topics", Array([
            F("topic_id", "uuid", 10),
            F("name", "nstring"),
        ], nullable=True)),
        F("allow_auto_topic_creation", "bool", 4, default=True),
        F("include_cluster_authorized_operations", "bool", 8, 10),
        F("include_topic_authorized_operations", "bool", 8),
    ],
    response=[
        F("throttle_time_ms", "int32", 3),
        F("brokers", Array([
            F("node_id", "int32"),
            F("host", "string"),
            F("port", "int32"),
            F("rack", "nstring", 1),
        ])),
        F("cluster_id", "nstring", 2),
        F("controller_id", "int32", 1, default=-1),
        F("topics", Array([
            F("error_code", "int16"),
            F("name", "nstring"),
            F("topic_id", "uuid", 10),
            F("is_internal", "bool", 1),
            F("partitions", Array([
                F("error_code", "int16"),
                F("partition_index", "int32"),
                F("leader_id", "int32"),
                F("leader_epoch", "int32", 7, default=-1),
                F("replica_nodes", Array("int32")),
                F("isr_nodes", Array("int32")),
                F("offline_replicas", Array("int32"), 5),
            ])),
            F("topic_authorized_operations", "int32", 8, default=-2147483648),
        ])),
        F("cluster_authorized_operations", "int32", 8, 10, default=-2147483648),
    ],
)

FIND_COORDINATOR = Schema(
    10, "FindCoordinator", 0, 4, 3,
    request=[
        F("key", "string", 0, 3),
        F("key_type", "int8", 1, default=0),
        F("coordinator_keys", Array("string"), 4),
    ],
    response=[
        F("throttle_time_ms", "int32", 1),
        F("error_code", "int16", 0, 3),
        F("error_message", "nstring", 1, 3),
        F("node_id", "int32", 0, 3, default=-1),
        F("host", "string", 0, 3),
        F("port", "int32", 0, 3, default=-1),
        F("coordinators", Array([
            F("key", "string"),
            F("node_id", "int32"),
            F("host", "string"),
            F("port", "int32"),
            F("error_code", "int16"),
            F("error_message", "nstring"),
        ]), 4),
    ],
)

API_VERSIONS = Schema(
    18, "ApiVersions", 0, 3, 3,
    request=[
        F("client_software_name", "string", 3),
        F("client_software_version", "string", 3),
    ],
    response=[
        F("error_code", "int16"),
        F("api_keys", Array([
            F("api_key", "int16"),
            F("min_version", "int16"),
            F("max_version", "int16"),
        ])),
        F("throttle_time_ms", "int32", 1),
    ],
)

CREATE_TOPICS = Schema(
    19, "CreateTopics", 0, 5, 5,
    request=[
        F("topics", Array([
            F("name", "string"),
            F("num_partitions", "int32"),
            F("replication_factor", "int16"),
            F("assignments", Array([
                F("partition_index", "int32"),
                F("broker_ids", Array("int32")),
            ])),
            F("configs", Array([
                F("name", "string"),
                F("value", "nstring"),
            ])),
        ])),
        F("timeout_ms", "int32"),
        F("validate_only", "bool", 1),
    ],
    response=[
        F("throttle_time_ms", "int32", 2),
        F("topics", Array([
            F("name", "string"),
            F("error_code", "int16"),
            F("error_message", "nstring", 1),
            F("num_partitions", "int32", 5, default=-1),
            F("replication_factor", "int16", 5, default=-1),
            F("configs", Array([
                F("name", "string"),
                F("value", "nstring"),
                F("read_only", "bool"),
                F("config_source", "int8"),
                F("is_sensitive", "bool"),
            ], nullable=True), 5),
        ])),
    ],
)

DELETE_TOPICS = Schema(
    20, "DeleteTopics", 0, 5, 4,
    request=[
        F("topic_names", Array("string"), 0, 5),
        F("timeout_ms", "int32"),
    ],
    response=[
        F("throttle_time_ms", "int32", 1),
        F("responses", Array([
            F("name", "nstring"),
            F("error_code", "int16"),
            F("error_message", "nstring", 5),
        ])),
    ],
)

INIT_PRODUCER_ID = Schema(
    22, "InitProducerId", 0, 4, 2,
    request=[
        F("transactional_id", "nstring"),
        F("transaction_timeout_ms", "int32"),
        F("producer_id", "int64", 3, default=-1),
        F("producer_epoch", "int16", 3, default=-1),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("producer_id", "int64", default=-1),
        F("producer_epoch", "int16", default=-1),
    ],
)

CREATE_PARTITIONS = Schema(
    37, "CreatePartitions", 0, 3, 2,
    request=[
        F("topics", Array([
            F("name", "string"),
            F("count", "int32"),
            F("assignments", Array([F("broker_ids", Array("int32"))], nullable=True)),
        ])),
        F("timeout_ms", "int32"),
        F("validate_only", "bool"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("results", Array([
            F("name", "string"),
            F("error_code", "int16"),
            F("error_message", "nstring"),
        ])),
    ],
)

ALL = [PRODUCE, FETCH, LIST_OFFSETS, METADATA, FIND_COORDINATOR, API_VERSIONS,
       CREATE_TOPICS, DELETE_TOPICS, INIT_PRODUCER_ID, CREATE_PARTITIONS]
BY_KEY = {s.key: s for s in ALL}


def request_header_flexible(api_key: int, api_version: int) -> bool:
    """Request header v2 (with tagged fields) is used exactly when the body is flexible."""
    schema = BY_KEY.get(api_key)
    return schema is not None and schema.flexible(api_version)


def response_header_flexible(api_key: int, api_version: int) -> bool:
    # ApiVersions responses always use header v0 so any client can parse the version list.
    if api_key == API_VERSIONS.key:
        return False
    return request_header_flexible(api_key, api_version)


# -- consumer groups ------------------------------------------------------------------------
# The classic group protocol (JoinGroup/SyncGroup/Heartbeat/LeaveGroup), KIP-848's consumer
# protocol (ConsumerGroupHeartbeat/ConsumerGroupDescribe) and the committed offsets;
# ``groups.apis`` serves them. OffsetCommit 9 and OffsetFetch 9 carry member epochs;
# DescribeGroups stops before v6, which changes what an unknown group answers.

OFFSET_COMMIT = Schema(
    8, "OffsetCommit", 0, 9, 8,  # v9: generation_id is a KIP-848 member's epoch
    request=[
        F("group_id", "string"),
        F("generation_id", "int32", 1, default=-1),
        F("member_id", "string", 1, default=""),
        F("group_instance_id", "nstring", 7),
        F("retention_time_ms", "int64", 2, 4),
        F("topics", Array([
            F("name", "string"),
            F("partitions", Array([
                F("partition_index", "int32"),
                F("committed_offset", "int64"),
                F("committed_leader_epoch", "int32", 6, default=-1),
                F("commit_timestamp", "int64", 1, 1, default=-1),
                F("committed_metadata", "nstring"),
            ])),
        ])),
    ],
    response=[
        F("throttle_time_ms", "int32", 3),
        F("topics", Array([
            F("name", "string"),
            F("partitions", Array([
                F("partition_index", "int32"),
                F("error_code", "int16"),
            ])),
        ])),
    ],
)

_OFFSET_FETCH_TOPICS = Array([
    F("name", "string"),
    F("partition_indexes", Array("int32")),
], nullable=True)

OFFSET_FETCH = Schema(
    9, "OffsetFetch", 0, 9, 6,
    request=[
        F("group_id", "string", 0, 7),
        F("topics", _OFFSET_FETCH_TOPICS, 0, 7),
        F("groups", Array([
            F("group_id", "string"),
            F("member_id", "nstring", 9),
            F("member_epoch", "int32", 9, default=-1),
            F("topics", _OFFSET_FETCH_TOPICS),
        ]), 8),
        F("require_stable", "bool", 7, default=False),
    ],
    response=[
        F("throttle_time_ms", "int32", 3),
        F("topics", Array([
            F("name", "string"),
            F("partitions", Array([
                F("partition_index", "int32"),
                F("committed_offset", "int64", default=-1),
                F("committed_leader_epoch", "int32", 5, default=-1),
                F("metadata", "nstring"),
                F("error_code", "int16"),
            ])),
        ]), 0, 7),
        F("error_code", "int16", 2, 7, default=0),
        F("groups", Array([
            F("group_id", "string"),
            F("topics", Array([
                F("name", "string"),
                F("partitions", Array([
                    F("partition_index", "int32"),
                    F("committed_offset", "int64", default=-1),
                    F("committed_leader_epoch", "int32", default=-1),
                    F("metadata", "nstring"),
                    F("error_code", "int16"),
                ])),
            ])),
            F("error_code", "int16", default=0),
        ]), 8),
    ],
)

JOIN_GROUP = Schema(
    11, "JoinGroup", 0, 9, 6,
    request=[
        F("group_id", "string"),
        F("session_timeout_ms", "int32"),
        F("rebalance_timeout_ms", "int32", 1, default=-1),
        F("member_id", "string"),
        F("group_instance_id", "nstring", 5),
        F("protocol_type", "string"),
        F("protocols", Array([
            F("name", "string"),
            F("metadata", "bytes"),
        ])),
        F("reason", "nstring", 8),
    ],
    response=[
        F("throttle_time_ms", "int32", 2),
        F("error_code", "int16"),
        F("generation_id", "int32", default=-1),
        F("protocol_type", "nstring", 7),  # null: not yet chosen
        F("protocol_name", "nstring"),  # nullable from v7; "" before
        F("leader", "string"),
        F("skip_assignment", "bool", 9, default=False),
        F("member_id", "string"),
        F("members", Array([
            F("member_id", "string"),
            F("group_instance_id", "nstring", 5),
            F("metadata", "bytes"),
        ])),
    ],
)

HEARTBEAT = Schema(
    12, "Heartbeat", 0, 4, 4,
    request=[
        F("group_id", "string"),
        F("generation_id", "int32"),
        F("member_id", "string"),
        F("group_instance_id", "nstring", 3),
    ],
    response=[
        F("throttle_time_ms", "int32", 1),
        F("error_code", "int16"),
    ],
)

LEAVE_GROUP = Schema(
    13, "LeaveGroup", 0, 5, 4,
    request=[
        F("group_id", "string"),
        F("member_id", "string", 0, 2),
        F("members", Array([
            F("member_id", "string"),
            F("group_instance_id", "nstring"),
            F("reason", "nstring", 5),
        ]), 3),
    ],
    response=[
        F("throttle_time_ms", "int32", 1),
        F("error_code", "int16"),
        F("members", Array([
            F("member_id", "string"),
            F("group_instance_id", "nstring"),
            F("error_code", "int16"),
        ]), 3),
    ],
)

SYNC_GROUP = Schema(
    14, "SyncGroup", 0, 5, 4,
    request=[
        F("group_id", "string"),
        F("generation_id", "int32"),
        F("member_id", "string"),
        F("group_instance_id", "nstring", 3),
        F("protocol_type", "nstring", 5),
        F("protocol_name", "nstring", 5),
        F("assignments", Array([
            F("member_id", "string"),
            F("assignment", "bytes"),
        ])),
    ],
    response=[
        F("throttle_time_ms", "int32", 1),
        F("error_code", "int16"),
        F("protocol_type", "nstring", 5),
        F("protocol_name", "nstring", 5),
        F("assignment", "bytes", default=b""),
    ],
)

DESCRIBE_GROUPS = Schema(
    15, "DescribeGroups", 0, 5, 5,
    request=[
        F("groups", Array("string")),
        F("include_authorized_operations", "bool", 3, default=False),
    ],
    response=[
        F("throttle_time_ms", "int32", 1),
        F("groups", Array([
            F("error_code", "int16"),
            F("group_id", "string"),
            F("group_state", "string"),
            F("protocol_type", "string"),
            F("protocol_data", "string"),
            F("members", Array([
                F("member_id", "string"),
                F("group_instance_id", "nstring", 4),
                F("client_id", "string"),
                F("client_host", "string"),
                F("member_metadata", "bytes"),
                F("member_assignment", "bytes"),
            ])),
            F("authorized_operations", "int32", 3, default=-2147483648),
        ])),
    ],
)

LIST_GROUPS = Schema(
    16, "ListGroups", 0, 5, 3,
    request=[
        F("states_filter", Array("string"), 4),
        F("types_filter", Array("string"), 5),
    ],
    response=[
        F("throttle_time_ms", "int32", 1),
        F("error_code", "int16"),
        F("groups", Array([
            F("group_id", "string"),
            F("protocol_type", "string"),
            F("group_state", "string", 4),
            F("group_type", "string", 5),
        ])),
    ],
)

DELETE_GROUPS = Schema(
    42, "DeleteGroups", 0, 2, 2,
    request=[
        F("groups_names", Array("string")),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("results", Array([
            F("group_id", "string"),
            F("error_code", "int16"),
        ])),
    ],
)

OFFSET_DELETE = Schema(
    47, "OffsetDelete", 0, 0, 1,
    request=[
        F("group_id", "string"),
        F("topics", Array([
            F("name", "string"),
            F("partitions", Array([
                F("partition_index", "int32"),
            ])),
        ])),
    ],
    response=[
        F("error_code", "int16"),
        F("throttle_time_ms", "int32"),
        F("topics", Array([
            F("name", "string"),
            F("partitions", Array([
                F("partition_index", "int32"),
                F("error_code", "int16"),
            ])),
        ])),
    ],
)

_HEARTBEAT_TOPICS = Array([
    F("topic_id", "uuid"),
    F("partitions", Array("int32")),
], nullable=True)

CONSUMER_GROUP_HEARTBEAT = Schema(
    68, "ConsumerGroupHeartbeat", 0, 1, 0,  # v1: the member makes its own id; regexes
    request=[
        F("group_id", "string"),
        F("member_id", "string"),
        F("member_epoch", "int32"),
        F("instance_id", "nstring"),
        F("rack_id", "nstring"),
        F("rebalance_timeout_ms", "int32", default=-1),
        F("subscribed_topic_names", Array("string", nullable=True)),
        F("subscribed_topic_regex", "nstring", 1),
        F("server_assignor", "nstring"),
        F("topic_partitions", _HEARTBEAT_TOPICS),  # what the member owns; null: unchanged
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("error_message", "nstring"),
        F("member_id", "nstring"),
        F("member_epoch", "int32"),
        F("heartbeat_interval_ms", "int32"),
        F("assignment", Struct([
            F("topic_partitions", Array([
                F("topic_id", "uuid"),
                F("partitions", Array("int32")),
            ])),
        ], nullable=True)),  # null: unchanged
    ],
)

_DESCRIBED_ASSIGNMENT = Struct([
    F("topic_partitions", Array([
        F("topic_id", "uuid"),
        F("topic_name", "string"),
        F("partitions", Array("int32")),
    ])),
])

CONSUMER_GROUP_DESCRIBE = Schema(
    69, "ConsumerGroupDescribe", 0, 1, 0,  # v1: the member type (classic or consumer)
    request=[
        F("group_ids", Array("string")),
        F("include_authorized_operations", "bool"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("groups", Array([
            F("error_code", "int16"),
            F("error_message", "nstring"),
            F("group_id", "string"),
            F("group_state", "string"),
            F("group_epoch", "int32"),
            F("assignment_epoch", "int32"),
            F("assignor_name", "string"),
            F("members", Array([
                F("member_id", "string"),
                F("instance_id", "nstring"),
                F("rack_id", "nstring"),
                F("member_epoch", "int32"),
                F("client_id", "string"),
                F("client_host", "string"),
                F("subscribed_topic_names", Array("string")),
                F("subscribed_topic_regex", "nstring"),
                F("assignment", _DESCRIBED_ASSIGNMENT),
                F("target_assignment", _DESCRIBED_ASSIGNMENT),
                F("member_type", "int8", 1, default=-1),
            ])),
            F("authorized_operations", "int32", default=-2147483648),
        ])),
    ],
)

GROUP_APIS = [OFFSET_COMMIT, OFFSET_FETCH, JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP,
              DESCRIBE_GROUPS, LIST_GROUPS, DELETE_GROUPS, OFFSET_DELETE,
              CONSUMER_GROUP_HEARTBEAT, CONSUMER_GROUP_DESCRIBE]


# -- administration -------------------------------------------------------------------------
# What kafka-configs, kafka-ui, AKHQ and the admin clients call besides topic creation.

_CONFIG_RESULT = [
    F("error_code", "int16"),
    F("error_message", "nstring"),
    F("resource_type", "int8"),
    F("resource_name", "string"),
]

DELETE_RECORDS = Schema(
    21, "DeleteRecords", 0, 2, 2,
    request=[
        F("topics", Array([
            F("name", "string"),
            F("partitions", Array([
                F("partition_index", "int32"),
                F("offset", "int64"),
            ])),
        ])),
        F("timeout_ms", "int32"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("topics", Array([
            F("name", "string"),
            F("partitions", Array([
                F("partition_index", "int32"),
                F("low_watermark", "int64", default=-1),
                F("error_code", "int16"),
            ])),
        ])),
    ],
)

DESCRIBE_CONFIGS = Schema(
    32, "DescribeConfigs", 0, 4, 4,
    request=[
        F("resources", Array([
            F("resource_type", "int8"),
            F("resource_name", "string"),
            F("configuration_keys", Array("string", nullable=True)),
        ])),
        F("include_synonyms", "bool", 1, default=False),
        F("include_documentation", "bool", 3, default=False),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("results", Array([
            F("error_code", "int16"),
            F("error_message", "nstring"),
            F("resource_type", "int8"),
            F("resource_name", "string"),
            F("configs", Array([
                F("name", "string"),
                F("value", "nstring"),
                F("read_only", "bool"),
                F("config_source", "int8", 1, default=-1),
                F("is_default", "bool", 0, 0, default=False),
                F("is_sensitive", "bool"),
                F("synonyms", Array([
                    F("name", "string"),
                    F("value", "nstring"),
                    F("source", "int8"),
                ]), 1),
                F("config_type", "int8", 3, default=0),
                F("documentation", "nstring", 3),
            ])),
        ])),
    ],
)

ALTER_CONFIGS = Schema(
    33, "AlterConfigs", 0, 2, 2,
    request=[
        F("resources", Array([
            F("resource_type", "int8"),
            F("resource_name", "string"),
            F("configs", Array([
                F("name", "string"),
                F("value", "nstring"),
            ])),
        ])),
        F("validate_only", "bool"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("responses", Array(_CONFIG_RESULT)),
    ],
)

INCREMENTAL_ALTER_CONFIGS = Schema(
    44, "IncrementalAlterConfigs", 0, 1, 1,
    request=[
        F("resources", Array([
            F("resource_type", "int8"),
            F("resource_name", "string"),
            F("configs", Array([
                F("name", "string"),
                F("config_operation", "int8"),
                F("value", "nstring"),
            ])),
        ])),
        F("validate_only", "bool"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("responses", Array(_CONFIG_RESULT)),
    ],
)

DESCRIBE_CLUSTER = Schema(
    60, "DescribeCluster", 0, 2, 0,
    request=[
        F("include_cluster_authorized_operations", "bool"),
        F("endpoint_type", "int8", 1, default=1),
        F("include_fenced_brokers", "bool", 2, default=False),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("error_message", "nstring"),
        F("endpoint_type", "int8", 1, default=1),
        F("cluster_id", "string"),
        F("controller_id", "int32", default=-1),
        F("brokers", Array([
            F("broker_id", "int32"),
            F("host", "string"),
            F("port", "int32"),
            F("rack", "nstring"),
            F("is_fenced", "bool", 2, default=False),
        ])),
        F("cluster_authorized_operations", "int32", default=-2147483648),
    ],
)

ADMIN_APIS = [DELETE_RECORDS, DESCRIBE_CONFIGS, ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS,
              DESCRIBE_CLUSTER]

ALL.extend(GROUP_APIS + ADMIN_APIS)
BY_KEY.update({s.key: s for s in GROUP_APIS + ADMIN_APIS})


# -- ACLs -----------------------------------------------------------------------------------
# Kafka's ACL admin APIs (``acl.apis``): v1 added the pattern type (PREFIXED), v2 made them
# flexible. They need ALTER (create, delete) or DESCRIBE (describe) on the cluster, and
# answer SECURITY_DISABLED when the broker runs without an authorizer.

_ACL_FILTER = [
    F("resource_type_filter", "int8"),
    F("resource_name_filter", "nstring"),
    F("pattern_type_filter", "int8", 1, default=3),  # LITERAL before v1
    F("principal_filter", "nstring"),
    F("host_filter", "nstring"),
    F("operation", "int8"),
    F("permission_type", "int8"),
]

DESCRIBE_ACLS = Schema(
    29, "DescribeAcls", 0, 3, 2,
    request=_ACL_FILTER,
    response=[
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("error_message", "nstring"),
        F("resources", Array([
            F("resource_type", "int8"),
            F("resource_name", "string"),
            F("pattern_type", "int8", 1, default=3),
            F("acls", Array([
                F("principal", "string"),
                F("host", "string"),
                F("operation", "int8"),
                F("permission_type", "int8"),
            ])),
        ])),
    ],
)

CREATE_ACLS = Schema(
    30, "CreateAcls", 0, 3, 2,
    request=[
        F("creations", Array([
            F("resource_type", "int8"),
            F("resource_name", "string"),
            F("resource_pattern_type", "int8", 1, default=3),
            F("principal", "string"),
            F("host", "string"),
            F("operation", "int8"),
            F("permission_type", "int8"),
        ])),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("results", Array([
            F("error_code", "int16"),
            F("error_message", "nstring"),
        ])),
    ],
)

DELETE_ACLS = Schema(
    31, "DeleteAcls", 0, 3, 2,
    request=[
        F("filters", Array(_ACL_FILTER)),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("filter_results", Array([
            F("error_code", "int16"),
            F("error_message", "nstring"),
            F("matching_acls", Array([
                F("error_code", "int16"),
                F("error_message", "nstring"),
                F("resource_type", "int8"),
                F("resource_name", "string"),
                F("pattern_type", "int8", 1, default=3),
                F("principal", "string"),
                F("host", "string"),
                F("operation", "int8"),
                F("permission_type", "int8"),
            ])),
        ])),
    ],
)

ACL_APIS = [DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS]
ALL.extend(ACL_APIS)
BY_KEY.update({s.key: s for s in ACL_APIS})


# -- transactions (KIP-98, KIP-447) ----------------------------------------------------------
# AddPartitionsToTxn stops at v3: v4+ batches transactional ids for broker-to-broker
# verification (KIP-890), which one broker never sends itself.

_TXN_TOPIC = [F("name", "string"), F("partitions", Array("int32"))]

ADD_PARTITIONS_TO_TXN = Schema(
    24, "AddPartitionsToTxn", 0, 3, 3,
    request=[
        F("transactional_id", "string"),
        F("producer_id", "int64"),
        F("producer_epoch", "int16"),
        F("topics", Array(_TXN_TOPIC)),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("results", Array([
            F("name", "string"),
            F("results", Array([
                F("partition_index", "int32"),
                F("partition_error_code", "int16"),
            ])),
        ])),
    ],
)

ADD_OFFSETS_TO_TXN = Schema(
    25, "AddOffsetsToTxn", 0, 3, 3,
    request=[
        F("transactional_id", "string"),
        F("producer_id", "int64"),
        F("producer_epoch", "int16"),
        F("group_id", "string"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
    ],
)

END_TXN = Schema(
    26, "EndTxn", 0, 3, 3,
    request=[
        F("transactional_id", "string"),
        F("producer_id", "int64"),
        F("producer_epoch", "int16"),
        F("committed", "bool"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
    ],
)

TXN_OFFSET_COMMIT = Schema(
    28, "TxnOffsetCommit", 0, 3, 3,
    request=[
        F("transactional_id", "string"),
        F("group_id", "string"),
        F("producer_id", "int64"),
        F("producer_epoch", "int16"),
        F("generation_id", "int32", 3, default=-1),
        F("member_id", "string", 3, default=""),
        F("group_instance_id", "nstring", 3),
        F("topics", Array([
            F("name", "string"),
            F("partitions", Array([
                F("partition_index", "int32"),
                F("committed_offset", "int64"),
                F("committed_leader_epoch", "int32", 2, default=-1),
                F("committed_metadata", "nstring"),
            ])),
        ])),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("topics", Array([
            F("name", "string"),
            F("partitions", Array([
                F("partition_index", "int32"),
                F("error_code", "int16"),
            ])),
        ])),
    ],
)

TRANSACTION_APIS = [ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN, TXN_OFFSET_COMMIT]
ALL.extend(TRANSACTION_APIS)
BY_KEY.update({s.key: s for s in TRANSACTION_APIS})


# -- looking at transactions and producers (KIP-664: the kafka-transactions tool) -----------
# ListTransactions v1 adds a duration filter (KIP-994), v2 a transactional id pattern
# (KIP-1152); its response is v0's.

_TXN_PARTITIONS = [F("name", "string"), F("partition_indexes", Array("int32"))]

DESCRIBE_PRODUCERS = Schema(
    61, "DescribeProducers", 0, 0, 0,
    request=[
        F("topics", Array(_TXN_PARTITIONS)),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("topics", Array([
            F("name", "string"),
            F("partitions", Array([
                F("partition_index", "int32"),
                F("error_code", "int16"),
                F("error_message", "nstring"),
                F("active_producers", Array([
                    F("producer_id", "int64"),
                    F("producer_epoch", "int32"),
                    F("last_sequence", "int32", default=-1),
                    F("last_timestamp", "int64", default=-1),
                    F("coordinator_epoch", "int32"),
                    F("current_txn_start_offset", "int64", default=-1),
                ])),
            ])),
        ])),
    ],
)

DESCRIBE_TRANSACTIONS = Schema(
    65, "DescribeTransactions", 0, 0, 0,
    request=[
        F("transactional_ids", Array("string")),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("transaction_states", Array([
            F("error_code", "int16"),
            F("transactional_id", "string"),
            F("transaction_state", "string"),
            F("transaction_timeout_ms", "int32"),
            F("transaction_start_time_ms", "int64"),
            F("producer_id", "int64"),
            F("producer_epoch", "int16"),
            F("topics", Array([
                F("topic", "string"),
                F("partitions", Array("int32")),
            ])),
        ])),
    ],
)

LIST_TRANSACTIONS = Schema(
    66, "ListTransactions", 0, 2, 0,
    request=[
        F("state_filters", Array("string")),
        F("producer_id_filters", Array("int64")),
        F("duration_filter", "int64", 1, default=-1),
        F("transactional_id_pattern", "nstring", 2),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("unknown_state_filters", Array("string")),
        F("transaction_states", Array([
            F("transactional_id", "string"),
            F("producer_id", "int64"),
            F("transaction_state", "string"),
        ])),
    ],
)

TRANSACTION_ADMIN_APIS = [DESCRIBE_PRODUCERS, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS]
ALL.extend(TRANSACTION_ADMIN_APIS)
BY_KEY.update({s.key: s for s in TRANSACTION_ADMIN_APIS})


# -- SASL -----------------------------------------------------------------------------------
# Advertised on every listener, as Kafka does; on a listener without SASL (or after a
# connection authenticated) both answer ILLEGAL_SASL_STATE. Handshake v0 (raw SASL tokens
# after it, outside Kafka framing) is not served: every client this broker targets speaks
# v1, which carries the tokens in SaslAuthenticate requests.

SASL_HANDSHAKE = Schema(
    17, "SaslHandshake", 0, 1, 2,
    request=[
        F("mechanism", "string"),
    ],
    response=[
        F("error_code", "int16"),
        F("mechanisms", Array("string")),
    ],
)

SASL_AUTHENTICATE = Schema(
    36, "SaslAuthenticate", 0, 2, 2,
    request=[
        F("auth_bytes", "bytes"),
    ],
    response=[
        F("error_code", "int16"),
        F("error_message", "nstring"),
        F("auth_bytes", "bytes", default=b""),
        F("session_lifetime_ms", "int64", 1, default=0),
    ],
)

SASL_APIS = (SASL_HANDSHAKE, SASL_AUTHENTICATE)
ALL.extend(SASL_APIS)
BY_KEY.update({s.key: s for s in SASL_APIS})


# -- cluster administration: one node's answers ----------------------------------------------
# What kafka-log-dirs, kafka-topics (DescribeTopicPartitions, KIP-966), kafka-configs,
# kafka-leader-election, kafka-reassign-partitions and the admin clients call; one broker
# holds every replica in one log directory (``cluster_apis``). SCRAM users through the
# admin API (KIP-554): ``scram_apis``.

DESCRIBE_LOG_DIRS = Schema(
    35, "DescribeLogDirs", 0, 4, 2,
    request=[
        F("topics", Array([
            F("topic", "string"),
            F("partitions", Array("int32")),
        ], nullable=True)),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("error_code", "int16", 3, default=0),
        F("results", Array([
            F("error_code", "int16"),
            F("log_dir", "string"),
            F("topics", Array([
                F("name", "string"),
                F("partitions", Array([
                    F("partition_index", "int32"),
                    F("partition_size", "int64"),
                    F("offset_lag", "int64"),
                    F("is_future_key", "bool"),
                ])),
            ])),
            F("total_bytes", "int64", 4, default=-1),
            F("usable_bytes", "int64", 4, default=-1),
        ])),
    ],
)

_CURSOR = [F("topic_name", "string"), F("partition_index", "int32")]

DESCRIBE_TOPIC_PARTITIONS = Schema(
    75, "DescribeTopicPartitions", 0, 0, 0,
    request=[
        F("topics", Array([F("name", "string")])),
        F("response_partition_limit", "int32", default=2000),
        F("cursor", Struct(_CURSOR, nullable=True)),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("topics", Array([
            F("error_code", "int16"),
            F("name", "nstring"),
            F("topic_id", "uuid"),
            F("is_internal", "bool", default=False),
            F("partitions", Array([
                F("error_code", "int16"),
                F("partition_index", "int32"),
                F("leader_id", "int32"),
                F("leader_epoch", "int32", default=-1),
                F("replica_nodes", Array("int32")),
                F("isr_nodes", Array("int32")),
                F("eligible_leader_replicas", Array("int32", nullable=True)),
                F("last_known_elr", Array("int32", nullable=True)),
                F("offline_replicas", Array("int32")),
            ])),
            F("topic_authorized_operations", "int32", default=-2147483648),
        ])),
        F("next_cursor", Struct(_CURSOR, nullable=True)),
    ],
)

# Kafka 4.1 renamed ListClientMetricsResources (v0, what 3.7-4.0 clients send: the
# client-metrics resources, none here) to ListConfigResources; v1 lists resources of the
# types asked for (KIP-1142).
LIST_CONFIG_RESOURCES = Schema(
    74, "ListConfigResources", 0, 1, 0,
    request=[
        F("resource_types", Array("int8"), 1),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("config_resources", Array([
            F("resource_name", "string"),
            F("resource_type", "int8", 1, default=16),
        ])),
    ],
)

ELECT_LEADERS = Schema(
    43, "ElectLeaders", 0, 2, 2,
    request=[
        F("election_type", "int8", 1, default=0),
        F("topic_partitions", Array([
            F("topic", "string"),
            F("partitions", Array("int32")),
        ], nullable=True)),
        F("timeout_ms", "int32", default=60000),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("error_code", "int16", 1, default=0),
        F("replica_election_results", Array([
            F("topic", "string"),
            F("partition_result", Array([
                F("partition_id", "int32"),
                F("error_code", "int16"),
                F("error_message", "nstring"),
            ])),
        ])),
    ],
)

ALTER_PARTITION_REASSIGNMENTS = Schema(
    45, "AlterPartitionReassignments", 0, 0, 0,
    request=[
        F("timeout_ms", "int32", default=60000),
        F("topics", Array([
            F("name", "string"),
            F("partitions", Array([
                F("partition_index", "int32"),
                F("replicas", Array("int32", nullable=True)),
            ])),
        ])),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("error_message", "nstring"),
        F("responses", Array([
            F("name", "string"),
            F("partitions", Array([
                F("partition_index", "int32"),
                F("error_code", "int16"),
                F("error_message", "nstring"),
            ])),
        ])),
    ],
)

LIST_PARTITION_REASSIGNMENTS = Schema(
    46, "ListPartitionReassignments", 0, 0, 0,
    request=[
        F("timeout_ms", "int32", default=60000),
        F("topics", Array([
            F("name", "string"),
            F("partition_indexes", Array("int32")),
        ], nullable=True)),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("error_message", "nstring"),
        F("topics", Array([
            F("name", "string"),
            F("partitions", Array([
                F("partition_index", "int32"),
                F("replicas", Array("int32")),
                F("adding_replicas", Array("int32")),
                F("removing_replicas", Array("int32")),
            ])),
        ])),
    ],
)

DESCRIBE_USER_SCRAM_CREDENTIALS = Schema(
    50, "DescribeUserScramCredentials", 0, 0, 0,
    request=[
        F("users", Array([F("name", "string")], nullable=True)),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("error_message", "nstring"),
        F("results", Array([
            F("user", "string"),
            F("error_code", "int16"),
            F("error_message", "nstring"),
            F("credential_infos", Array([
                F("mechanism", "int8"),
                F("iterations", "int32"),
            ])),
        ])),
    ],
)

ALTER_USER_SCRAM_CREDENTIALS = Schema(
    51, "AlterUserScramCredentials", 0, 0, 0,
    request=[
        F("deletions", Array([
            F("name", "string"),
            F("mechanism", "int8"),
        ])),
        F("upsertions", Array([
            F("name", "string"),
            F("mechanism", "int8"),
            F("iterations", "int32"),
            F("salt", "bytes"),
            F("salted_password", "bytes"),
        ])),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("results", Array([
            F("user", "string"),
            F("error_code", "int16"),
            F("error_message", "nstring"),
        ])),
    ],
)

CLUSTER_ADMIN_APIS = [DESCRIBE_LOG_DIRS, DESCRIBE_TOPIC_PARTITIONS, LIST_CONFIG_RESOURCES,
                      ELECT_LEADERS, ALTER_PARTITION_REASSIGNMENTS,
                      LIST_PARTITION_REASSIGNMENTS, DESCRIBE_USER_SCRAM_CREDENTIALS,
                      ALTER_USER_SCRAM_CREDENTIALS]
ALL.extend(CLUSTER_ADMIN_APIS)
BY_KEY.update({s.key: s for s in CLUSTER_ADMIN_APIS})
