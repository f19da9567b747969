"""What each API needs: one row per (API, resource type, operation), with the reason.

The handlers never spell an operation themselves: they ask the authorizer about a row of
this table (``authorizer.allows(caller, PRODUCE_TOPIC, name)``), so this table is the
whole of what the broker enforces, and the docs' table is generated from the same facts.
The rows follow Kafka's own (the operations and resources its brokers check, and the
error each denial answers).

``audit`` is False where a denial only narrows a listing (Metadata of all topics,
ListGroups, OffsetFetch of all committed topics): Kafka filters those silently, so they
are neither logged nor counted.
"""

from __future__ import annotations

from typing import NamedTuple

from appliance.broker.acl.model import Operation, ResourceType
from appliance.broker.wire import errors, schemas
from appliance.broker.wire.codec import Schema

R, Op = ResourceType, Operation


class Need(NamedTuple):
    api: Schema
    resource_type: ResourceType
    operation: Operation
    error: int  # what the denied resource answers
    why: str
    audit: bool = True  # a denial is logged and counted


TOPIC_DENIED = errors.TOPIC_AUTHORIZATION_FAILED
GROUP_DENIED = errors.GROUP_AUTHORIZATION_FAILED
CLUSTER_DENIED = errors.CLUSTER_AUTHORIZATION_FAILED
TXN_DENIED = errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED

PRODUCE_TOPIC = Need(schemas.PRODUCE, R.TOPIC, Op.WRITE, TOPIC_DENIED,
                     "appending records; each partition of a denied topic answers the error")
FETCH_TOPIC = Need(schemas.FETCH, R.TOPIC, Op.READ, TOPIC_DENIED, "reading records")
LIST_OFFSETS_TOPIC = Need(schemas.LIST_OFFSETS, R.TOPIC, Op.DESCRIBE, TOPIC_DENIED,
                          "a partition's offsets describe the topic")
METADATA_TOPIC = Need(schemas.METADATA, R.TOPIC, Op.DESCRIBE, TOPIC_DENIED,
                      "a topic asked for by name; denied names answer the error")
METADATA_ALL_TOPICS = Need(schemas.METADATA, R.TOPIC, Op.DESCRIBE, TOPIC_DENIED,
                           "all topics asked for: the denied ones are left out", audit=False)
METADATA_CREATE_CLUSTER = Need(schemas.METADATA, R.CLUSTER, Op.CREATE, TOPIC_DENIED,
                               "auto-creating a missing topic: CREATE on the cluster, ...",
                               audit=False)
METADATA_CREATE_TOPIC = Need(schemas.METADATA, R.TOPIC, Op.CREATE, TOPIC_DENIED,
                             "... or on the topic")
FIND_COORDINATOR_GROUP = Need(schemas.FIND_COORDINATOR, R.GROUP, Op.DESCRIBE, GROUP_DENIED,
                              "finding a group's coordinator")
OFFSET_COMMIT_GROUP = Need(schemas.OFFSET_COMMIT, R.GROUP, Op.READ, GROUP_DENIED,
                           "committing offsets is a group member's read progress")
OFFSET_COMMIT_TOPIC = Need(schemas.OFFSET_COMMIT, R.TOPIC, Op.READ, TOPIC_DENIED,
                           "... of a topic it may read")
OFFSET_FETCH_GROUP = Need(schemas.OFFSET_FETCH, R.GROUP, Op.DESCRIBE, GROUP_DENIED,
                          "reading a group's committed offsets")
OFFSET_FETCH_TOPIC = Need(schemas.OFFSET_FETCH, R.TOPIC, Op.DESCRIBE, TOPIC_DENIED,
                          "... of topics named in the request")
OFFSET_FETCH_ALL_TOPICS = Need(schemas.OFFSET_FETCH, R.TOPIC, Op.DESCRIBE, TOPIC_DENIED,
                               "all committed topics asked for: denied ones are left out",
                               audit=False)
JOIN_GROUP = Need(schemas.JOIN_GROUP, R.GROUP, Op.READ, GROUP_DENIED, "group membership")
SYNC_GROUP = Need(schemas.SYNC_GROUP, R.GROUP, Op.READ, GROUP_DENIED, "group membership")
HEARTBEAT = Need(schemas.HEARTBEAT, R.GROUP, Op.READ, GROUP_DENIED, "group membership")
LEAVE_GROUP = Need(schemas.LEAVE_GROUP, R.GROUP, Op.READ, GROUP_DENIED, "group membership")
CONSUMER_GROUP_HEARTBEAT = Need(schemas.CONSUMER_GROUP_HEARTBEAT, R.GROUP, Op.READ,
                                GROUP_DENIED, "group membership (KIP-848)")
CONSUMER_GROUP_DESCRIBE = Need(schemas.CONSUMER_GROUP_DESCRIBE, R.GROUP, Op.DESCRIBE,
                               GROUP_DENIED, "a consumer group's members and assignments")
DESCRIBE_GROUPS = Need(schemas.DESCRIBE_GROUPS, R.GROUP, Op.DESCRIBE, GROUP_DENIED,
                       "a group's members and assignments")
LIST_GROUPS_CLUSTER = Need(schemas.LIST_GROUPS, R.CLUSTER, Op.DESCRIBE, CLUSTER_DENIED,
                           "every group is listed with DESCRIBE on the cluster, ...",
                           audit=False)
LIST_GROUPS_GROUP = Need(schemas.LIST_GROUPS, R.GROUP, Op.DESCRIBE, GROUP_DENIED,
                         "... else only the groups it may describe", audit=False)
DELETE_GROUPS = Need(schemas.DELETE_GROUPS, R.GROUP, Op.DELETE, GROUP_DENIED,
                     "deleting a group")
OFFSET_DELETE_GROUP = Need(schemas.OFFSET_DELETE, R.GROUP, Op.DELETE, GROUP_DENIED,
                           "deleting a group's committed offsets")
OFFSET_DELETE_TOPIC = Need(schemas.OFFSET_DELETE, R.TOPIC, Op.READ, TOPIC_DENIED,
                           "... of a topic it may read")
CREATE_TOPICS_CLUSTER = Need(schemas.CREATE_TOPICS, R.CLUSTER, Op.CREATE, TOPIC_DENIED,
                             "creating any topic: CREATE on the cluster, ...", audit=False)
CREATE_TOPICS_TOPIC = Need(schemas.CREATE_TOPICS, R.TOPIC, Op.CREATE, TOPIC_DENIED,
                           "... or on the topic")
CREATE_TOPICS_DESCRIBE_CONFIGS = Need(schemas.CREATE_TOPICS, R.TOPIC, Op.DESCRIBE_CONFIGS,
                                      TOPIC_DENIED,
                                      "the created topic's configs in the answer (else none)",
                                      audit=False)
DELETE_TOPICS = Need(schemas.DELETE_TOPICS, R.TOPIC, Op.DELETE, TOPIC_DENIED,
                     "deleting a topic")
CREATE_PARTITIONS = Need(schemas.CREATE_PARTITIONS, R.TOPIC, Op.ALTER, TOPIC_DENIED,
                         "adding partitions alters the topic")
DELETE_RECORDS = Need(schemas.DELETE_RECORDS, R.TOPIC, Op.DELETE, TOPIC_DENIED,
                      "deleting records")
DESCRIBE_CONFIGS_TOPIC = Need(schemas.DESCRIBE_CONFIGS, R.TOPIC, Op.DESCRIBE_CONFIGS,
                              TOPIC_DENIED, "a topic's configs")
DESCRIBE_CONFIGS_BROKER = Need(schemas.DESCRIBE_CONFIGS, R.CLUSTER, Op.DESCRIBE_CONFIGS,
                               CLUSTER_DENIED, "the broker's configs")
ALTER_CONFIGS_TOPIC = Need(schemas.ALTER_CONFIGS, R.TOPIC, Op.ALTER_CONFIGS, TOPIC_DENIED,
                           "a topic's configs")
ALTER_CONFIGS_BROKER = Need(schemas.ALTER_CONFIGS, R.CLUSTER, Op.ALTER_CONFIGS,
                            CLUSTER_DENIED, "the broker's configs")
INCREMENTAL_ALTER_CONFIGS_TOPIC = Need(schemas.INCREMENTAL_ALTER_CONFIGS, R.TOPIC,
                                       Op.ALTER_CONFIGS, TOPIC_DENIED, "a topic's configs")
INCREMENTAL_ALTER_CONFIGS_BROKER = Need(schemas.INCREMENTAL_ALTER_CONFIGS, R.CLUSTER,
                                        Op.ALTER_CONFIGS, CLUSTER_DENIED,
                                        "the broker's configs")
INIT_PRODUCER_ID_CLUSTER = Need(schemas.INIT_PRODUCER_ID, R.CLUSTER, Op.IDEMPOTENT_WRITE,
                                CLUSTER_DENIED,
                                "an idempotent producer id: IDEMPOTENT_WRITE on the "
                                "cluster, ...", audit=False)
INIT_PRODUCER_ID_ANY_TOPIC = Need(schemas.INIT_PRODUCER_ID, R.TOPIC, Op.WRITE,
                                  CLUSTER_DENIED,
                                  "... or WRITE on some topic (Kafka 2.8+, KIP-679)")
FIND_COORDINATOR_TXN = Need(schemas.FIND_COORDINATOR, R.TRANSACTIONAL_ID, Op.DESCRIBE,
                            TXN_DENIED, "finding a transactional id's coordinator")
INIT_PRODUCER_ID_TXN = Need(schemas.INIT_PRODUCER_ID, R.TRANSACTIONAL_ID, Op.WRITE,
                            TXN_DENIED, "a transactional id's producer id and epoch")
PRODUCE_TXN = Need(schemas.PRODUCE, R.TRANSACTIONAL_ID, Op.WRITE, TXN_DENIED,
                   "a produce naming a transactional id")
ADD_PARTITIONS_TXN = Need(schemas.ADD_PARTITIONS_TO_TXN, R.TRANSACTIONAL_ID, Op.WRITE,
                          TXN_DENIED, "adding partitions to a transaction, ...")
ADD_PARTITIONS_TOPIC = Need(schemas.ADD_PARTITIONS_TO_TXN, R.TOPIC, Op.WRITE, TOPIC_DENIED,
                            "... of topics it may write")
ADD_OFFSETS_TXN = Need(schemas.ADD_OFFSETS_TO_TXN, R.TRANSACTIONAL_ID, Op.WRITE, TXN_DENIED,
                       "adding a group's offsets to a transaction, ...")
ADD_OFFSETS_GROUP = Need(schemas.ADD_OFFSETS_TO_TXN, R.GROUP, Op.READ, GROUP_DENIED,
                         "... of a group it may commit for")
TXN_OFFSET_COMMIT_TXN = Need(schemas.TXN_OFFSET_COMMIT, R.TRANSACTIONAL_ID, Op.WRITE,
                             TXN_DENIED, "committing offsets inside a transaction, ...")
TXN_OFFSET_COMMIT_GROUP = Need(schemas.TXN_OFFSET_COMMIT, R.GROUP, Op.READ, GROUP_DENIED,
                               "... for a group it may commit for, ...")
TXN_OFFSET_COMMIT_TOPIC = Need(schemas.TXN_OFFSET_COMMIT, R.TOPIC, Op.READ, TOPIC_DENIED,
                               "... of topics it may read")
END_TXN = Need(schemas.END_TXN, R.TRANSACTIONAL_ID, Op.WRITE, TXN_DENIED,
               "committing or aborting a transaction")
DESCRIBE_PRODUCERS_TOPIC = Need(schemas.DESCRIBE_PRODUCERS, R.TOPIC, Op.READ, TOPIC_DENIED,
                                "a partition's producers and their open transactions")
DESCRIBE_TRANSACTIONS_TXN = Need(schemas.DESCRIBE_TRANSACTIONS, R.TRANSACTIONAL_ID,
                                 Op.DESCRIBE, TXN_DENIED, "a transactional id's state, ...")
DESCRIBE_TRANSACTIONS_TOPIC = Need(schemas.DESCRIBE_TRANSACTIONS, R.TOPIC, Op.DESCRIBE,
                                   TOPIC_DENIED, "... and its partitions of topics it may "
                                   "describe (the others left out)", audit=False)
LIST_TRANSACTIONS_TXN = Need(schemas.LIST_TRANSACTIONS, R.TRANSACTIONAL_ID, Op.DESCRIBE,
                             TXN_DENIED, "transactional ids listed: those it may describe",
                             audit=False)
CREATE_ACLS = Need(schemas.CREATE_ACLS, R.CLUSTER, Op.ALTER, CLUSTER_DENIED,
                   "changing who may do what")
DELETE_ACLS = Need(schemas.DELETE_ACLS, R.CLUSTER, Op.ALTER, CLUSTER_DENIED,
                   "changing who may do what")
DESCRIBE_ACLS = Need(schemas.DESCRIBE_ACLS, R.CLUSTER, Op.DESCRIBE, CLUSTER_DENIED,
                     "reading who may do what")
DESCRIBE_LOG_DIRS = Need(schemas.DESCRIBE_LOG_DIRS, R.CLUSTER, Op.DESCRIBE, CLUSTER_DENIED,
                          "the log directory and partition sizes")
DESCRIBE_TOPIC_PARTITIONS = Need(schemas.DESCRIBE_TOPIC_PARTITIONS, R.TOPIC, Op.DESCRIBE,
                                 TOPIC_DENIED, "a topic's partitions, as Metadata")
DESCRIBE_TOPIC_PARTITIONS_ALL = Need(schemas.DESCRIBE_TOPIC_PARTITIONS, R.TOPIC, Op.DESCRIBE,
                                     TOPIC_DENIED, "all topics asked for: denied ones are left "
                                     "out", audit=False)
LIST_CONFIG_RESOURCES_TOPIC = Need(schemas.LIST_CONFIG_RESOURCES, R.TOPIC, Op.DESCRIBE_CONFIGS,
                                   TOPIC_DENIED, "topics listed: those whose configs it may "
                                   "describe", audit=False)
LIST_CONFIG_RESOURCES_BROKER = Need(schemas.LIST_CONFIG_RESOURCES, R.CLUSTER,
                                    Op.DESCRIBE_CONFIGS, CLUSTER_DENIED,
                                    "the broker listed", audit=False)
ELECT_LEADERS = Need(schemas.ELECT_LEADERS, R.CLUSTER, Op.ALTER, CLUSTER_DENIED,
                     "electing leaders")
ALTER_PARTITION_REASSIGNMENTS = Need(schemas.ALTER_PARTITION_REASSIGNMENTS, R.CLUSTER,
                                     Op.ALTER, CLUSTER_DENIED, "moving replicas")
LIST_PARTITION_REASSIGNMENTS = Need(schemas.LIST_PARTITION_REASSIGNMENTS, R.CLUSTER,
                                    Op.DESCRIBE, CLUSTER_DENIED, "replicas being moved")
DESCRIBE_USER_SCRAM_CREDENTIALS = Need(schemas.DESCRIBE_USER_SCRAM_CREDENTIALS, R.CLUSTER,
                                       Op.DESCRIBE, CLUSTER_DENIED,
                                       "users and their SCRAM mechanisms")
ALTER_USER_SCRAM_CREDENTIALS = Need(schemas.ALTER_USER_SCRAM_CREDENTIALS, R.CLUSTER,
                                    Op.ALTER, CLUSTER_DENIED, "adding and removing users")
DESCRIBE_CLUSTER_OPERATIONS = Need(schemas.METADATA, R.CLUSTER, Op.DESCRIBE, CLUSTER_DENIED,
                                   "cluster_authorized_operations (Metadata, DescribeCluster): "
                                   "0 without it", audit=False)

TABLE: tuple[Need, ...] = tuple(v for v in list(globals().values()) if isinstance(v, Need))
