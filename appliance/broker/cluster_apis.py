"""The cluster-administration calls real tools make, answered as a one-node Kafka would.

kafka-log-dirs and ``Admin.describeLogDirs`` (DescribeLogDirs: one directory, each
partition's size, the disk's total and usable bytes), kafka-topics of Kafka 3.7+
(DescribeTopicPartitions, KIP-966: Metadata's partitions, paged by a cursor),
``Admin.listClientMetricsResources``/``listConfigResources`` (ListConfigResources: the
topics and the broker; no client-metrics resources), kafka-leader-election (ElectLeaders:
the one broker already leads every partition: ELECTION_NOT_NEEDED) and
kafka-reassign-partitions (Alter/ListPartitionReassignments: every replica is on broker 0
already; moving one elsewhere is INVALID_REPLICA_ASSIGNMENT, and nothing is ever in
progress). Each answers at once; none of them closes the connection.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from appliance.broker.acl import needs
from appliance.broker.acl.authorizer import Authorizer
from appliance.broker.acl.model import CLUSTER_NAME, Operation, ResourceType
from appliance.broker.caller import Caller
from appliance.broker.settings import BrokerConfig
from appliance.broker.storage.partition import LEADER_EPOCH
from appliance.broker.storage.topic_configs import ResourceType as ConfigResourceType
from appliance.broker.storage.topic_registry import TopicRegistry
from appliance.broker.wire import errors

MAX_PARTITIONS_PER_PAGE = 2000  # Kafka's max.request.partition.size.limit
MEMORY_LOG_DIR = "(memory)"  # the log "directory" of a broker without --data-dir
CLIENT_METRICS, BROKER_LOGGER, GROUP = 16, 8, 32  # config resource types listed as none
TOPIC_OPERATIONS = (Operation.READ, Operation.WRITE, Operation.CREATE, Operation.DELETE,
                    Operation.ALTER, Operation.DESCRIBE, Operation.DESCRIBE_CONFIGS,
                    Operation.ALTER_CONFIGS)


class ClusterApis:
    def __init__(self, config: BrokerConfig, registry: TopicRegistry,
                 authorizer: Authorizer) -> None:
        self.config = config
        self.registry = registry
        self.authorizer = authorizer

    def _replicas(self) -> list[int]:
        return [self.config.node_id]

    # -- DescribeLogDirs ------------------------------------------------------------------

    def describe_log_dirs(self, version: int, req: dict, caller: Caller):
        if not self.authorizer.allows(caller, needs.DESCRIBE_LOG_DIRS, CLUSTER_NAME):
            return {"throttle_time_ms": 0, "error_code": errors.CLUSTER_AUTHORIZATION_FAILED,
                    "results": []}
        reg = self.registry
        wanted = ({t.name: range(len(t.partitions)) for t in reg.topics.values()}
                  if req["topics"] is None else
                  {t["topic"]: t["partitions"] for t in req["topics"]
                   if t["topic"] in reg.topics})
        topics = []
        for name, indexes in wanted.items():
            parts = []
            for index in indexes:
                p = reg.partition(name, index)
                if p is not None:
                    parts.append({"partition_index": index, "partition_size": p.size_bytes(),
                                  "offset_lag": 0, "is_future_key": False})
            topics.append({"name": name, "partitions": parts})
        if self.config.data_dir is not None:
            log_dir = str(Path(self.config.data_dir).resolve())
            usage = shutil.disk_usage(log_dir)
            total, usable = usage.total, usage.free
        else:
            log_dir = MEMORY_LOG_DIR
            total, usable = reg.budget.limit, max(reg.budget.limit - reg.budget.used, 0)
        return {"throttle_time_ms": 0, "error_code": errors.NONE, "results": [
            {"error_code": errors.NONE, "log_dir": log_dir, "topics": topics,
             "total_bytes": total, "usable_bytes": usable}]}

    # -- DescribeTopicPartitions ---------------------------------------------------------

    def describe_topic_partitions(self, version: int, req: dict, caller: Caller):
        """Topics by name (none named: every topic the caller may describe), sorted, their
        partitions from the cursor on, at most ``response_partition_limit`` in all."""
        authz = self.authorizer
        reg = self.registry
        asked = [t["name"] for t in req["topics"]]
        if asked:
            names = sorted(set(asked))
        else:
            names = sorted(n for n in reg.topics
                           if authz.allows(caller, needs.DESCRIBE_TOPIC_PARTITIONS_ALL, n))
        cursor = req["cursor"]
        if cursor is not None:
            names = [n for n in names if n >= cursor["topic_name"]]
        limit = min(max(req["response_partition_limit"], 1), MAX_PARTITIONS_PER_PAGE)
        node = self.config.node_id
        out: list[dict] = []
        next_cursor = None
        for name in names:
            topic = reg.topics.get(name)
            if topic is None or (asked and not authz.allows(
                    caller, needs.DESCRIBE_TOPIC_PARTITIONS, name)):
                out.append({"error_code": errors.UNKNOWN_TOPIC_OR_PARTITION if topic is None
                            else errors.TOPIC_AUTHORIZATION_FAILED, "name": name,
                            "topic_id": bytes(16), "is_internal": False, "partitions": []})
                continue
            first = cursor["partition_index"] if (
                cursor is not None and name == cursor["topic_name"]) else 0
            parts = []
            for index in range(first, len(topic.partitions)):
                if limit == 0:
                    next_cursor = {"topic_name": name, "partition_index": index}
                    break
                parts.append({"error_code": errors.NONE, "partition_index": index,
                              "leader_id": node, "leader_epoch": LEADER_EPOCH,
                              "replica_nodes": [node], "isr_nodes": [node],
                              "eligible_leader_replicas": [], "last_known_elr": [],
                              "offline_replicas": []})
                limit -= 1
            out.append({"error_code": errors.NONE, "name": name, "topic_id": topic.topic_id,
                        "is_internal": False, "partitions": parts,
                        "topic_authorized_operations": authz.authorized_operations(
                            caller, ResourceType.TOPIC, name, TOPIC_OPERATIONS)})
            if next_cursor is not None:
                break
        return {"throttle_time_ms": 0, "topics": out, "next_cursor": next_cursor}

    # -- ListConfigResources ------------------------------------------------------------

    def list_config_resources(self, version: int, req: dict, caller: Caller):
        """v0 (ListClientMetricsResources): client-metrics resources, of which there are
        none; v1: the topics the caller may describe the configs of and the broker (no
        types asked: both), none of the other types."""
        if version == 0:
            return {"throttle_time_ms": 0, "error_code": errors.NONE, "config_resources": []}
        types = set(req["resource_types"]) or {int(ConfigResourceType.TOPIC),
                                              int(ConfigResourceType.BROKER)}
        known = {int(ConfigResourceType.TOPIC), int(ConfigResourceType.BROKER),
                 BROKER_LOGGER, CLIENT_METRICS, GROUP}
        if not types <= known:
            return {"throttle_time_ms": 0, "error_code": errors.INVALID_REQUEST,
                    "config_resources": []}
        authz = self.authorizer
        out = []
        if ConfigResourceType.TOPIC in types:
            out += [{"resource_name": n, "resource_type": int(ConfigResourceType.TOPIC)}
                    for n in sorted(self.registry.topics)
                    if authz.allows(caller, needs.LIST_CONFIG_RESOURCES_TOPIC, n)]
        if ConfigResourceType.BROKER in types and authz.allows(
                caller, needs.LIST_CONFIG_RESOURCES_BROKER, CLUSTER_NAME):
            out.append({"resource_name": str(self.config.node_id),
                        "resource_type": int(ConfigResourceType.BROKER)})
        return {"throttle_time_ms": 0, "error_code": errors.NONE, "config_resources": out}

    # -- ElectLeaders and reassignments -------------------------------------------------

    def _per_partition(self, topics: list[tuple[str, list[int]]], known: int,
                       message: str) -> list[tuple[str, list[tuple[int, int, str]]]]:
        """``known`` (with ``message``) for each existing partition, else its error."""
        out = []
        for name, indexes in topics:
            results: list[tuple[int, int, str]] = []
            for index in indexes:
                if self.registry.partition(name, index) is None:
                    results.append((index, errors.UNKNOWN_TOPIC_OR_PARTITION,
                                    f"unknown topic-partition {name}-{index}"))
                else:
                    results.append((index, known, message))
            out.append((name, results))
        return out

    def elect_leaders(self, version: int, req: dict, caller: Caller):
        if not self.authorizer.allows(caller, needs.ELECT_LEADERS, CLUSTER_NAME):
            denied = errors.CLUSTER_AUTHORIZATION_FAILED
            topics = [(t["topic"], t["partitions"]) for t in req["topic_partitions"] or []]
            return {"throttle_time_ms": 0, "error_code": denied,
                    "replica_election_results": [
                        {"topic": name, "partition_result": [
                            {"partition_id": i, "error_code": denied, "error_message": None}
                            for i in indexes]} for name, indexes in topics]}
        if req["topic_partitions"] is None:  # every partition: none needs an election
            return {"throttle_time_ms": 0, "error_code": errors.NONE,
                    "replica_election_results": []}
        results = self._per_partition(
            [(t["topic"], t["partitions"]) for t in req["topic_partitions"]],
            errors.ELECTION_NOT_NEEDED, "this broker is the only replica and leads it")
        return {"throttle_time_ms": 0, "error_code": errors.NONE,
                "replica_election_results": [
                    {"topic": name, "partition_result": [
                        {"partition_id": i, "error_code": code, "error_message": msg}
                        for i, code, msg in parts]} for name, parts in results]}

    def alter_partition_reassignments(self, version: int, req: dict, caller: Caller):
        if not self.authorizer.allows(caller, needs.ALTER_PARTITION_REASSIGNMENTS,
                                      CLUSTER_NAME):
            return {"throttle_time_ms": 0, "error_code": errors.CLUSTER_AUTHORIZATION_FAILED,
                    "error_message": f"{caller.principal} may not ALTER the cluster",
                    "responses": []}
        node = self.config.node_id
        responses = []
        for t in req["topics"]:
            parts = []
            for p in t["partitions"]:
                index, replicas = p["partition_index"], p["replicas"]
                if self.registry.partition(t["name"], index) is None:
                    code, msg = errors.UNKNOWN_TOPIC_OR_PARTITION, (
                        f"unknown topic-partition {t['name']}-{index}")
                elif replicas is None:
                    code, msg = errors.NO_REASSIGNMENT_IN_PROGRESS, (
                        "nothing is being reassigned on a one-broker cluster")
                elif replicas == [node]:
                    code, msg = errors.NONE, None  # already where it is asked to be
                else:
                    code, msg = errors.INVALID_REPLICA_ASSIGNMENT, (
                        f"one broker (id {node}): replicas must be [{node}], got {replicas}")
                parts.append({"partition_index": index, "error_code": code,
                              "error_message": msg})
            responses.append({"name": t["name"], "partitions": parts})
        return {"throttle_time_ms": 0, "error_code": errors.NONE, "error_message": None,
                "responses": responses}

    def list_partition_reassignments(self, version: int, req: dict, caller: Caller):
        if not self.authorizer.allows(caller, needs.LIST_PARTITION_REASSIGNMENTS,
                                      CLUSTER_NAME):
            return {"throttle_time_ms": 0, "error_code": errors.CLUSTER_AUTHORIZATION_FAILED,
                    "error_message": f"{caller.principal} may not DESCRIBE the cluster",
                    "topics": []}
        return {"throttle_time_ms": 0, "error_code": errors.NONE, "error_message": None,
                "topics": []}  # nothing is ever being moved
