"""Request handlers: one per Kafka API, ``(version, request dict, caller)`` in, response
dict out. This module holds the log's APIs (produce, fetch, offsets, metadata, topics) and
the dispatch table; consumer groups are ``groups.apis``, configs and DeleteRecords
``admin_apis``.

Fetch may instead return a future (a long-poll), and so may JoinGroup and SyncGroup (a
member parked in a rebalance); every other handler answers at once. Produce with acks=0
returns None: Kafka sends no response for it.
"""

from __future__ import annotations

import asyncio
import time
from functools import partial
from typing import NamedTuple

from appliance.broker.acl import needs
from appliance.broker.acl.apis import AclApis
from appliance.broker.acl.authorizer import Authorizer
from appliance.broker.acl.model import CLUSTER_NAME, Operation, ResourceType
from appliance.broker.acl.store import AclStore
from appliance.broker.admin_apis import AdminApis
from appliance.broker.caller import Caller
from appliance.broker.cluster_apis import ClusterApis
from appliance.broker.groups.apis import GroupApis
from appliance.broker.groups.consumer_groups import ConsumerGroupCoordinator
from appliance.broker.groups.coordinator import GroupCoordinator
from appliance.broker.groups.offsets import Committed, OffsetKey, OffsetStore
from appliance.broker.scram_apis import ScramApis
from appliance.broker.security.credentials import Users
from appliance.broker.settings import BrokerConfig
from appliance.broker.slices import Job, Slicer
from appliance.broker.storage import timestamp_search
from appliance.broker.storage.batch_policy import BatchPolicy, keys_refusal
from appliance.broker.storage.fetch_wait import FetchedPartition, FetchWait
from appliance.broker.storage.partition import LEADER_EPOCH, PartitionLog
from appliance.broker.storage.producer_ids import ProducerIdError
from appliance.broker.storage.topic_registry import TopicRegistry, TopicRegistryError
from appliance.broker.txn.admin_apis import TxnAdminApis
from appliance.broker.txn.apis import TxnApis
from appliance.broker.txn.coordinator import TxnCoordinator
from appliance.broker.txn.state_store import PendingOffset, TopicPartition, TxnStateStore
from appliance.broker.wire import errors, schemas
from appliance.broker.wire.compression import CompressionError
from appliance.broker.wire.records import BatchError, BatchHeader, split_batches, with_codec
from appliance.logs import get_logger


class CoordinatorType:
    """FindCoordinator ``key_type``."""

    GROUP = 0
    TRANSACTION = 1


# What DescribeCluster reports the caller may do to the cluster (all, without ACLs).
CLUSTER_OPERATIONS = (Operation.CREATE, Operation.ALTER, Operation.DESCRIBE,
                      Operation.CLUSTER_ACTION, Operation.DESCRIBE_CONFIGS,
                      Operation.ALTER_CONFIGS, Operation.IDEMPOTENT_WRITE)
# ... and Metadata to a topic.
TOPIC_OPERATIONS = (Operation.READ, Operation.WRITE, Operation.CREATE, Operation.DELETE,
                    Operation.ALTER, Operation.DESCRIBE, Operation.DESCRIBE_CONFIGS,
                    Operation.ALTER_CONFIGS)
NOT_REQUESTED = -2147483648


class SpecialTimestamp:
    """ListOffsets' timestamps that name a position instead of a time."""

    LATEST = -1
    EARLIEST = -2
    MAX_TIMESTAMP = -3  # v7+ (KIP-734)
    EARLIEST_LOCAL = -4  # v8+ (KIP-405): no tiered storage, so the log start
    LATEST_TIERED = -5  # v9+ (KIP-1005): nothing is tiered: no offset


class PartitionProduce(NamedTuple):
    """One partition of a produce that passed the batch policy."""

    partition: PartitionLog
    batches: list[bytes | memoryview]
    headers: list[BatchHeader]


log = get_logger("appliance.broker")


def _now_ms() -> int:
    return int(time.time() * 1000)


class Apis:
    def __init__(self, config: BrokerConfig, registry: TopicRegistry, storage=None,
                 users: Users | None = None) -> None:
        self.config = config
        self.registry = registry
        self.storage = storage
        self.advertised_host = config.host if config.host not in ("0.0.0.0", "") else "127.0.0.1"
        self.advertised_port = config.port
        self.slicer = Slicer()
        self.offsets = OffsetStore(config.data_dir, fsync=config.flush != "write")
        self.coordinator = GroupCoordinator(
            config, self.offsets, lambda: len(self.consumer_groups.groups),
            lambda: self.consumer_groups.subscription_total)
        self.consumer_groups = ConsumerGroupCoordinator(
            config, self.offsets,
            lambda: {name: len(t.partitions) for name, t in registry.topics.items()},
            lambda: len(self.coordinator.groups), lambda: self.coordinator.metadata_total)
        registry.read_through = self.offsets.read_through
        self._refusing = False  # produces refused for a full log budget, until one fits
        # AclStoreError (a bad acls.json) stops the start: serving with fewer ACLs than
        # the operator wrote could refuse the wrong clients, with more, allow them.
        self.acl_store = AclStore(config.data_dir)
        self.authorizer = Authorizer(config.authorizer, config.super_users,
                                     self.acl_store.load() if config.authorizer != "none"
                                     else [])
        authz = self.authorizer
        groups = GroupApis(self.coordinator, self.consumer_groups, self.offsets, registry,
                           authz)
        admin = AdminApis(config, registry, authz, lambda: (self.advertised_host,
                                                            self.advertised_port))
        acls = AclApis(authz, self.acl_store)
        cluster = ClusterApis(config, registry, authz)
        scram = ScramApis(config, users, authz)
        self.txn_coordinator = TxnCoordinator(registry, registry.producer_ids,
                                              TxnStateStore(config.data_dir,
                                                            sync=config.flush != "write"),
                                              self._commit_txn_offsets)
        self.txn_coordinator.recover(_now_ms())
        txn = self.txn = TxnApis(self.txn_coordinator, registry, authz)
        txn_admin = TxnAdminApis(self.txn_coordinator, registry, authz)
        self.handlers = {
            schemas.PRODUCE.key: self.produce,
            schemas.FETCH.key: self.fetch,
            schemas.LIST_OFFSETS.key: self.list_offsets,
            schemas.METADATA.key: self.metadata,
            schemas.FIND_COORDINATOR.key: self.find_coordinator,
            schemas.API_VERSIONS.key: self.api_versions,
            schemas.CREATE_TOPICS.key: self.create_topics,
            schemas.DELETE_TOPICS.key: self.delete_topics,
            schemas.INIT_PRODUCER_ID.key: self.init_producer_id,
            schemas.CREATE_PARTITIONS.key: self.create_partitions,
            schemas.OFFSET_COMMIT.key: groups.offset_commit,
            schemas.OFFSET_FETCH.key: groups.offset_fetch,
            schemas.JOIN_GROUP.key: groups.join_group,
            schemas.HEARTBEAT.key: groups.heartbeat,
            schemas.LEAVE_GROUP.key: groups.leave_group,
            schemas.SYNC_GROUP.key: groups.sync_group,
            schemas.DESCRIBE_GROUPS.key: groups.describe_groups,
            schemas.LIST_GROUPS.key: groups.list_groups,
            schemas.DELETE_GROUPS.key: groups.delete_groups,
            schemas.OFFSET_DELETE.key: groups.offset_delete,
            schemas.CONSUMER_GROUP_HEARTBEAT.key: groups.consumer_group_heartbeat,
            schemas.CONSUMER_GROUP_DESCRIBE.key: groups.consumer_group_describe,
            schemas.DESCRIBE_CONFIGS.key: admin.describe_configs,
            schemas.ALTER_CONFIGS.key: admin.alter_configs,
            schemas.INCREMENTAL_ALTER_CONFIGS.key: admin.incremental_alter_configs,
            schemas.DELETE_RECORDS.key: admin.delete_records,
            schemas.DESCRIBE_CLUSTER.key: self.describe_cluster,
            schemas.ADD_PARTITIONS_TO_TXN.key: txn.add_partitions_to_txn,
            schemas.ADD_OFFSETS_TO_TXN.key: txn.add_offsets_to_txn,
            schemas.END_TXN.key: txn.end_txn,
            schemas.TXN_OFFSET_COMMIT.key: txn.txn_offset_commit,
            schemas.DESCRIBE_PRODUCERS.key: txn_admin.describe_producers,
            schemas.DESCRIBE_TRANSACTIONS.key: txn_admin.describe_transactions,
            schemas.LIST_TRANSACTIONS.key: txn_admin.list_transactions,
            schemas.CREATE_ACLS.key: acls.create_acls,
            schemas.DESCRIBE_ACLS.key: acls.describe_acls,
            schemas.DELETE_ACLS.key: acls.delete_acls,
            schemas.DESCRIBE_LOG_DIRS.key: cluster.describe_log_dirs,
            schemas.DESCRIBE_TOPIC_PARTITIONS.key: cluster.describe_topic_partitions,
            schemas.LIST_CONFIG_RESOURCES.key: cluster.list_config_resources,
            schemas.ELECT_LEADERS.key: cluster.elect_leaders,
            schemas.ALTER_PARTITION_REASSIGNMENTS.key: cluster.alter_partition_reassignments,
            schemas.LIST_PARTITION_REASSIGNMENTS.key: cluster.list_partition_reassignments,
            schemas.DESCRIBE_USER_SCRAM_CREDENTIALS.key: scram.describe_user_scram_credentials,
            schemas.ALTER_USER_SCRAM_CREDENTIALS.key: scram.alter_user_scram_credentials,
        }

    def _commit_txn_offsets(self, group: str,
                            offsets: dict[TopicPartition, PendingOffset]) -> None:
        """A committed transaction's offsets become the group's."""
        now = _now_ms()
        self.offsets.commit(group, [
            (OffsetKey(tp.topic, tp.partition),
             Committed(o.offset, o.leader_epoch, o.metadata, now))
            for tp, o in offsets.items()])

    def reload_acls(self) -> int:
        """Take the ACL file's bindings into force (SIGHUP); their count. AclStoreError
        leaves the bindings in force unchanged."""
        bindings = self.acl_store.load()
        self.authorizer.replace(bindings)
        return len(bindings)

    # -- ApiVersions / Metadata ---------------------------------------------------------

    @staticmethod
    def api_version_list() -> list[dict]:
        return [{"api_key": s.key, "min_version": s.min_version, "max_version": s.max_version}
                for s in schemas.ALL]

    def api_versions(self, version: int, req: dict, caller: Caller):
        return {"error_code": errors.NONE, "api_keys": self.api_version_list(),
                "throttle_time_ms": 0}

    def _partition_meta(self, index: int) -> dict:
        node = self.config.node_id
        return {"error_code": 0, "partition_index": index, "leader_id": node,
                "leader_epoch": LEADER_EPOCH, "replica_nodes": [node], "isr_nodes": [node],
                "offline_replicas": []}

    def _topic_meta(self, topic, caller: Caller, with_operations: bool) -> dict:
        return {"error_code": 0, "name": topic.name, "topic_id": topic.topic_id,
                "is_internal": False,
                "partitions": [self._partition_meta(i) for i in range(len(topic.partitions))],
                "topic_authorized_operations": self.authorizer.authorized_operations(
                    caller, ResourceType.TOPIC, topic.name, TOPIC_OPERATIONS)
                if with_operations else NOT_REQUESTED}

    def _may_create(self, caller: Caller, name: str) -> bool:
        authz = self.authorizer
        return (authz.allows(caller, needs.METADATA_CREATE_CLUSTER, CLUSTER_NAME)
                or authz.allows(caller, needs.METADATA_CREATE_TOPIC, name))

    def metadata(self, version: int, req: dict, caller: Caller):
        reg = self.registry
        authz = self.authorizer
        wanted = req["topics"]
        ops = req["include_topic_authorized_operations"]
        out = []
        if wanted is None:
            out = [self._topic_meta(t, caller, ops) for t in reg.topics.values()
                   if authz.allows(caller, needs.METADATA_ALL_TOPICS, t.name)]
        else:
            by_id = {t.topic_id: t for t in reg.topics.values()}
            for item in wanted:
                name = item["name"]
                by_topic_id = name is None
                if by_topic_id:
                    topic = by_id.get(item.get("topic_id") or b"")
                    name = topic.name if topic is not None else None
                else:
                    topic = reg.topics.get(name)
                if name is not None and (
                        not authz.allows(caller, needs.METADATA_TOPIC, name)
                        or (topic is None and req["allow_auto_topic_creation"]
                            and self.config.auto_create_topics
                            and not self._may_create(caller, name))):
                    # asked by id: the name of a topic it may not describe stays unsaid
                    out.append({"error_code": errors.TOPIC_AUTHORIZATION_FAILED,
                                "name": None if by_topic_id else name,
                                "topic_id": item.get("topic_id"),
                                "is_internal": False, "partitions": []})
                    continue
                if topic is None and name is not None and req["allow_auto_topic_creation"]:
                    topic = reg.maybe_auto_create(name)
                if topic is None:
                    out.append({"error_code": errors.UNKNOWN_TOPIC_OR_PARTITION, "name": name,
                                "topic_id": item.get("topic_id"), "is_internal": False,
                                "partitions": []})
                else:
                    out.append(self._topic_meta(topic, caller, ops))
        node = self.config.node_id
        return {"throttle_time_ms": 0,
                "brokers": [{"node_id": node, "host": self.advertised_host,
                             "port": self.advertised_port, "rack": None}],
                "cluster_id": self.config.cluster_id, "controller_id": node, "topics": out,
                "cluster_authorized_operations": self._cluster_operations(caller)
                if req["include_cluster_authorized_operations"] else NOT_REQUESTED}

    def _cluster_operations(self, caller: Caller) -> int:
        """What the caller may do to the cluster; as Kafka, only told to a caller that may
        describe the cluster (0 otherwise)."""
        authz = self.authorizer
        if not authz.allows(caller, needs.DESCRIBE_CLUSTER_OPERATIONS, CLUSTER_NAME):
            return 0
        return authz.authorized_operations(caller, ResourceType.CLUSTER, CLUSTER_NAME,
                                           CLUSTER_OPERATIONS)

    # -- Produce ------------------------------------------------------------------------

    def produce(self, version: int, req: dict, caller: Caller):
        """Each partition's record set checked by its topic's batch policy (a refused
        batch refuses the partition's whole set), then appended all or nothing. A topic
        whose compression.type asks for another codec has its batches rewritten first,
        on the slicer (``produce_job``)."""
        acks = req["acks"]
        responses = []
        authz = self.authorizer
        accepted: list[tuple[dict, PartitionProduce, BatchPolicy]] = []
        txn_id = req["transactional_id"]
        if txn_id is not None and not authz.allows(caller, needs.PRODUCE_TXN, txn_id):
            return None if acks == 0 else {"throttle_time_ms": 0, "responses": [
                {"name": t["name"], "partition_responses": [
                    {"index": pd["index"], "error_code": needs.TXN_DENIED, "base_offset": -1,
                     "log_append_time_ms": -1, "log_start_offset": -1, "record_errors": [],
                     "error_message": None} for pd in t["partition_data"]]}
                for t in req["topic_data"]]}
        for t in req["topic_data"]:
            name = t["name"]
            if not authz.allows(caller, needs.PRODUCE_TOPIC, name):
                responses.append({"name": name, "partition_responses": [
                    {"index": pd["index"], "error_code": errors.TOPIC_AUTHORIZATION_FAILED,
                     "base_offset": -1, "log_append_time_ms": -1, "log_start_offset": -1,
                     "record_errors": [], "error_message": None}
                    for pd in t["partition_data"]]})
                continue
            topic = self.registry.topics.get(name)
            if topic is None and self._may_create(caller, name):
                topic = self.registry.maybe_auto_create(name)
            policy = self.registry.batch_policy(topic) if topic is not None else None
            parts = []
            for pd in t["partition_data"]:
                index = pd["index"]
                out = {"index": index, "error_code": errors.NONE, "base_offset": -1,
                       "log_append_time_ms": -1, "log_start_offset": -1,
                       "record_errors": [], "error_message": None}
                parts.append(out)
                partition = (topic.partitions[index]
                             if topic is not None and 0 <= index < len(topic.partitions)
                             else None)
                if acks not in (-1, 0, 1):
                    out.update(error_code=errors.INVALID_REQUIRED_ACKS,
                               error_message=f"acks={acks} (use -1, 0 or 1)")
                    continue
                if partition is None or policy is None:
                    out.update(error_code=errors.UNKNOWN_TOPIC_OR_PARTITION,
                               error_message=f"unknown topic-partition {name}-{index}")
                    continue
                out["log_start_offset"] = partition.log_start_offset
                checked = self._checked(pd["records"], partition, policy, out)
                if checked is not None:
                    accepted.append((out, checked, policy))
            responses.append({"name": name, "partition_responses": parts})
        body = {"responses": responses, "throttle_time_ms": 0}
        if any(policy.needs_worker for _, _, policy in accepted):
            result = self.slicer.run(self._produce_job(accepted, body))
        else:
            now = _now_ms()
            for out, checked, _policy in accepted:
                self._append(out, checked, now)
            self._after_appends()
            result = body
        return None if acks == 0 else result

    def _checked(self, records, partition: PartitionLog, policy: BatchPolicy,
                 out: dict) -> PartitionProduce | None:
        """The partition's batches if every one passes the policy, else None with the
        error in ``out``."""
        try:
            if not records:
                raise BatchError("empty record set")
            headers = split_batches(records)
        except BatchError as exc:
            out.update(error_code=errors.CORRUPT_MESSAGE, error_message=str(exc))
            return None
        view = memoryview(records)
        batches: list[bytes | memoryview] = []
        for h in headers:
            batch = view[h.start:h.start + h.size]
            refused = policy.refusal(h, batch, self.registry.producer_ids)
            if refused is not None:
                out.update(error_code=refused.error, error_message=refused.message)
                return None
            if h.is_transactional:
                err = self.txn_coordinator.produce_refusal(
                    h.producer_id, h.producer_epoch, partition.topic, partition.index)
                if err:
                    out.update(error_code=err, error_message=(
                        f"producer {h.producer_id} epoch {h.producer_epoch} has no ongoing "
                        f"transaction holding {partition.topic}-{partition.index}"
                        if err == errors.INVALID_TXN_STATE else
                        f"producer {h.producer_id} epoch {h.producer_epoch} was fenced by a "
                        f"newer epoch"))
                    return None
            batches.append(batch)
        return PartitionProduce(partition, batches, headers)

    def _append(self, out: dict, checked: PartitionProduce, now_ms: int) -> None:
        part = checked.partition
        if not self.registry.room_for(part.append_cost(checked.batches)):
            self._budget_full(out, part)
            return
        if self._refusing:
            self._refusing = False
            log.info("broker.log_budget_room", refused_produces=self.registry.budget
                     .refused_produces)
        err, base, msg = part.append(checked.batches, checked.headers, now_ms)
        out.update(error_code=err, base_offset=base, error_message=msg,
                   log_start_offset=checked.partition.log_start_offset)

    def _budget_full(self, out: dict, part: PartitionLog) -> None:
        """The log budget is full of data consumer groups have not read: refuse with
        Kafka's retriable storage error (the producer backs off and retries; nothing
        acknowledged is lost). Logged once per episode."""
        budget = self.registry.budget
        if not self._refusing:
            log.warning("broker.log_budget_full", topic=part.topic, partition=part.index,
                        limit_bytes=budget.limit, used_bytes=budget.used,
                        policy=self.config.retention_total_policy.value)
        self._refusing = True
        budget.refused_produces += 1
        out.update(error_code=errors.KAFKA_STORAGE_ERROR, base_offset=-1,
                   log_start_offset=part.log_start_offset,
                   error_message=f"the log is at its budget ({budget.limit} bytes, "
                                 f"--retention-total-bytes) and holds only data consumer "
                                 f"groups have not read: retry once they read on or "
                                 f"retention frees space")

    def _after_appends(self) -> None:
        if self.registry.budget.over:
            self.registry.enforce_budget()

    def _produce_job(self, accepted: list[tuple[dict, PartitionProduce, BatchPolicy]],
                     body: dict) -> Job:
        """Rewrite the batches of topics with a compression.type, and check the keys of
        compressed batches of compacted topics (on the worker thread, at most
        max_decompressed_bytes each), then append as ``produce`` does."""
        limit = self.config.max_decompressed_bytes
        ready = []
        for out, checked, policy in accepted:
            batches, headers = [], []
            for batch, h in zip(checked.batches, checked.headers, strict=True):
                if policy.keys_checked_later(h):
                    refused = yield partial(keys_refusal, batch, limit)
                    if refused is not None:
                        out.update(error_code=refused.error, error_message=refused.message)
                        break
                codec = policy.recompress_to(h)
                if codec is not None:
                    try:
                        batch = yield partial(with_codec, batch, codec, limit)
                    except CompressionError as exc:
                        out.update(error_code=errors.CORRUPT_MESSAGE,
                                   error_message=f"cannot recompress to {codec.config_name}: "
                                                 f"{exc}")
                        break
                    h = split_batches(batch)[0]
                batches.append(batch)
                headers.append(h)
            else:
                ready.append((out, PartitionProduce(checked.partition, batches, headers)))
        now = _now_ms()
        for out, checked in ready:
            self._append(out, checked, now)
        self._after_appends()
        return body

    # -- Fetch ------------------------------------------------------------------------

    def _wanted(self, req: dict, denied: frozenset[str]) -> list[FetchedPartition]:
        """The partitions a fetch asks for, each once (Kafka keeps the last of duplicates,
        at the place of the first)."""
        wanted: dict[tuple[str, int], FetchedPartition] = {}
        for t in req["topics"]:
            name = t["topic"]
            for p in t["partitions"]:
                index = p["partition"]
                wanted[(name, index)] = FetchedPartition(
                    name, index, p["fetch_offset"], max(p["partition_max_bytes"], 0),
                    name in denied)
        return list(wanted.values())

    def _fetch_now(self, req: dict, wanted: list[FetchedPartition]) -> tuple[dict, int, bool]:
        """(response as of now, its record bytes, whether any partition has an error).

        The response carries at most the request's ``max_bytes``, and never more than the
        broker's ``--fetch-max-bytes`` (Kafka's fetch.max.bytes); the first batch found
        goes whole even if larger, so a consumer always moves on (KIP-74).
        """
        asked = req["max_bytes"]
        budget = min(asked if asked > 0 else self.config.fetch_max_bytes,
                     self.config.fetch_max_bytes)
        total = 0
        failed = False
        read_committed = req["isolation_level"] == 1
        responses: list[dict] = []
        by_topic: dict[str, list] = {}
        for w in wanted:
            parts = by_topic.get(w.topic)
            if parts is None:
                parts = by_topic[w.topic] = []
                responses.append({"topic": w.topic, "partitions": parts})
            partition = None if w.denied else self.registry.partition(w.topic, w.partition)
            if partition is None:
                failed = True
                parts.append({"partition_index": w.partition,
                              "error_code": errors.TOPIC_AUTHORIZATION_FAILED if w.denied
                              else errors.UNKNOWN_TOPIC_OR_PARTITION,
                              "high_watermark": -1, "last_stable_offset": -1,
                              "log_start_offset": -1, "aborted_transactions": None,
                              "records": b""})
                continue
            limit = min(w.max_bytes, max(budget - total, 0))
            err, records, n = partition.read(w.offset, limit, at_least_one=total == 0,
                                             committed=read_committed)
            failed = failed or err != errors.NONE
            total += n
            lso = partition.last_stable_offset
            aborted = None
            if read_committed:
                aborted = [{"producer_id": a.producer_id, "first_offset": a.first_offset}
                           for a in partition.aborted_between(w.offset, lso)] if n else []
            parts.append({"partition_index": w.partition, "error_code": err,
                          "high_watermark": partition.high_watermark,
                          "last_stable_offset": lso,
                          "log_start_offset": partition.log_start_offset,
                          "aborted_transactions": aborted,
                          "preferred_read_replica": -1, "records": records})
        return ({"throttle_time_ms": 0, "error_code": 0, "session_id": 0,
                 "responses": responses}, total, failed)

    def fetch(self, version: int, req: dict, caller: Caller):
        authz = self.authorizer
        denied = frozenset(t["topic"] for t in req["topics"]
                           if not authz.allows(caller, needs.FETCH_TOPIC, t["topic"])
                           ) if authz.enabled else frozenset()
        wanted = self._wanted(req, denied)
        resp, total, failed = self._fetch_now(req, wanted)
        wait_ms = req["max_wait_ms"]
        logs = [log for w in wanted if not w.denied
                and (log := self.registry.partition(w.topic, w.partition)) is not None]
        if total >= req["min_bytes"] or wait_ms <= 0 or failed or not logs:
            return resp
        # The parked fetch keeps only what it needs to answer: not the request.
        fetch_req = {"max_bytes": req["max_bytes"], "isolation_level": req["isolation_level"]}
        waiter = FetchWait(asyncio.get_running_loop(), logs, req["min_bytes"] - total,
                           wait_ms, lambda: self._fetch_now(fetch_req, wanted)[0])
        return waiter.future

    # -- ListOffsets --------------------------------------------------------------------

    def list_offsets(self, version: int, req: dict, caller: Caller):
        """Offsets by position (earliest, latest) at once; by timestamp (and v7+'s max
        timestamp) through a walk over records, run on the slicer: the answer may be a
        future."""
        topics = []
        searches: list[tuple[dict, Job]] = []
        limit = self.config.max_decompressed_bytes
        for t in req["topics"]:
            parts = []
            allowed = self.authorizer.allows(caller, needs.LIST_OFFSETS_TOPIC, t["name"])
            for p in t["partitions"]:
                partition = self.registry.partition(t["name"], p["partition_index"])
                out = {"partition_index": p["partition_index"], "error_code": 0,
                       "timestamp": -1, "offset": -1, "leader_epoch": LEADER_EPOCH}
                ts = p["timestamp"]
                if not allowed:
                    out.update(error_code=errors.TOPIC_AUTHORIZATION_FAILED, leader_epoch=-1)
                elif partition is None:
                    out.update(error_code=errors.UNKNOWN_TOPIC_OR_PARTITION, leader_epoch=-1)
                elif ts in (SpecialTimestamp.EARLIEST, SpecialTimestamp.EARLIEST_LOCAL):
                    out["offset"] = partition.log_start_offset
                elif ts == SpecialTimestamp.LATEST:
                    out["offset"] = (partition.last_stable_offset if req["isolation_level"] == 1
                                     else partition.high_watermark)
                elif ts == SpecialTimestamp.LATEST_TIERED:
                    pass  # no tiered storage: no offset (-1), as Kafka without it
                elif ts == SpecialTimestamp.MAX_TIMESTAMP and version >= 7:
                    searches.append((out, timestamp_search.max_timestamp(partition, limit)))
                elif ts < 0:
                    out["error_code"] = errors.UNSUPPORTED_VERSION
                else:
                    searches.append((out, timestamp_search.first_at_or_after(
                        partition, ts, limit)))
                parts.append(out)
            topics.append({"name": t["name"], "partitions": parts})
        body = {"throttle_time_ms": 0, "topics": topics}
        if not searches:
            return self._old_style(body)
        return self.slicer.run(self._searches(searches, body))

    def _searches(self, searches: list[tuple[dict, Job]], body: dict) -> Job:
        for out, search in searches:
            out["offset"], out["timestamp"] = yield from search
        return self._old_style(body)

    @staticmethod
    def _old_style(body: dict) -> dict:
        for t in body["topics"]:
            for out in t["partitions"]:
                out["old_style_offsets"] = [out["offset"]] if out["offset"] >= 0 else []
        return body

    # -- topic administration -----------------------------------------------------------

    def create_topics(self, version: int, req: dict, caller: Caller):
        out = []
        authz = self.authorizer
        cluster_create = authz.allows(caller, needs.CREATE_TOPICS_CLUSTER, CLUSTER_NAME)
        for t in req["topics"]:
            res = {"name": t["name"], "error_code": 0, "error_message": None,
                   "num_partitions": -1, "replication_factor": -1, "configs": []}
            if not cluster_create and not authz.allows(caller, needs.CREATE_TOPICS_TOPIC,
                                                       t["name"]):
                res.update(error_code=errors.TOPIC_AUTHORIZATION_FAILED,
                           error_message=f"{caller.principal} may not create {t['name']!r}")
                out.append(res)
                continue
            try:
                count = t["num_partitions"]
                if t["assignments"]:
                    if count != -1 or t["replication_factor"] != -1:
                        raise TopicRegistryError(errors.INVALID_REQUEST,
                                         "give either assignments or partitions/replication")
                    count = len(t["assignments"])
                elif t["replication_factor"] not in (-1, 1):
                    raise TopicRegistryError(errors.INVALID_REPLICATION_FACTOR,
                                     "single-broker cluster: replication factor must be 1")
                configs = {c["name"]: c["value"] for c in t["configs"]}
                topic = self.registry.create(t["name"], count, configs,
                                             validate_only=req["validate_only"])
                res.update(num_partitions=len(topic.partitions) or (
                    count if count > 0 else self.config.default_partitions),
                    replication_factor=1)
                # as Kafka: a topic's configs only to a caller that may describe them
                res["configs"] = [{"name": k, "value": v, "read_only": False,
                                   "config_source": 1, "is_sensitive": False}
                                  for k, v in topic.configs.items()] if authz.allows(
                    caller, needs.CREATE_TOPICS_DESCRIBE_CONFIGS, t["name"]) else None
            except TopicRegistryError as exc:
                res.update(error_code=exc.code, error_message=exc.message)
            out.append(res)
        return {"throttle_time_ms": 0, "topics": out}

    def delete_topics(self, version: int, req: dict, caller: Caller):
        out = []
        for name in req["topic_names"]:
            res = {"name": name, "error_code": 0, "error_message": None}
            if not self.authorizer.allows(caller, needs.DELETE_TOPICS, name):
                res.update(error_code=errors.TOPIC_AUTHORIZATION_FAILED,
                           error_message=f"{caller.principal} may not delete {name!r}")
                out.append(res)
                continue
            try:
                self.registry.delete(name)
                self.offsets.forget_topic(name)
            except TopicRegistryError as exc:
                res.update(error_code=exc.code, error_message=exc.message)
            out.append(res)
        return {"throttle_time_ms": 0, "responses": out}

    def create_partitions(self, version: int, req: dict, caller: Caller):
        out = []
        for t in req["topics"]:
            res = {"name": t["name"], "error_code": 0, "error_message": None}
            if not self.authorizer.allows(caller, needs.CREATE_PARTITIONS, t["name"]):
                res.update(error_code=errors.TOPIC_AUTHORIZATION_FAILED,
                           error_message=f"{caller.principal} may not alter {t['name']!r}")
                out.append(res)
                continue
            try:
                self.registry.add_partitions(t["name"], t["count"], req["validate_only"])
                if not req["validate_only"]:
                    self.coordinator.partitions_added(t["name"])
            except TopicRegistryError as exc:
                res.update(error_code=exc.code, error_message=exc.message)
            out.append(res)
        return {"throttle_time_ms": 0, "results": out}

    # -- cluster ------------------------------------------------------------------------

    def describe_cluster(self, version: int, req: dict, caller: Caller):
        """One node: the broker, and (endpoint type 2) the controller too."""
        node = self.config.node_id
        return {"throttle_time_ms": 0, "error_code": errors.NONE, "error_message": None,
                "endpoint_type": req["endpoint_type"], "cluster_id": self.config.cluster_id,
                "controller_id": node,
                "brokers": [{"broker_id": node, "host": self.advertised_host,
                             "port": self.advertised_port, "rack": None, "is_fenced": False}],
                "cluster_authorized_operations": self._cluster_operations(caller)
                if req["include_cluster_authorized_operations"] else NOT_REQUESTED}

    # -- producers, coordinators -----------------------------------------------------------

    def init_producer_id(self, version: int, req: dict, caller: Caller):
        if req["transactional_id"] is not None:
            return self.txn.init_producer(req, caller)
        authz = self.authorizer
        if not (authz.allows(caller, needs.INIT_PRODUCER_ID_CLUSTER, CLUSTER_NAME)
                or authz.allows_any(caller, needs.INIT_PRODUCER_ID_ANY_TOPIC)):
            return {"throttle_time_ms": 0, "error_code": errors.CLUSTER_AUTHORIZATION_FAILED}
        ids = self.registry.producer_ids
        pid, epoch = req["producer_id"], req["producer_epoch"]
        if pid >= 0:
            bumped = ids.bump(pid, epoch)  # an epoch bump after a client-side error
            if bumped is not None:
                return {"throttle_time_ms": 0, "error_code": 0, "producer_id": pid,
                        "producer_epoch": bumped}
        try:
            pid = ids.issue()
        except ProducerIdError as exc:  # retriable: clients try again
            log.error("broker.producer_ids_unavailable", error=str(exc))
            return {"throttle_time_ms": 0, "error_code": errors.COORDINATOR_NOT_AVAILABLE}
        return {"throttle_time_ms": 0, "error_code": 0, "producer_id": pid, "producer_epoch": 0}

    def find_coordinator(self, version: int, req: dict, caller: Caller):
        """This broker coordinates every group and every transactional id."""
        node, host, port = self.config.node_id, self.advertised_host, self.advertised_port
        key_type = req["key_type"]
        keys = req["coordinator_keys"] or []
        if key_type == CoordinatorType.GROUP:
            found = {"error_code": 0, "error_message": None, "node_id": node, "host": host,
                     "port": port}
            if self.authorizer.enabled:
                return self._coordinators(caller, [req["key"]] if version < 4 else keys,
                                          found, needs.FIND_COORDINATOR_GROUP)
        elif key_type == CoordinatorType.TRANSACTION:
            found = {"error_code": 0, "error_message": None, "node_id": node, "host": host,
                     "port": port}
            if self.authorizer.enabled:
                return self._coordinators(caller, [req["key"]] if version < 4 else keys,
                                          found, needs.FIND_COORDINATOR_TXN)
        else:
            found = {"error_code": errors.INVALID_REQUEST,
                     "error_message": f"unknown coordinator type {key_type} "
                                      f"(0: group, 1: transaction)",
                     "node_id": -1, "host": "", "port": -1}
        return {"throttle_time_ms": 0, **found,
                "coordinators": [{"key": k, **found} for k in keys]}

    def _coordinators(self, caller: Caller, keys: list[str], found: dict,
                      need: needs.Need) -> dict:
        """FindCoordinator for groups or transactional ids, each needing DESCRIBE on its
        resource."""
        denied = {"error_code": need.error, "error_message": None,
                  "node_id": -1, "host": "", "port": -1}
        answers = [{"key": g, **(found if self.authorizer.allows(caller, need, g)
                                 else denied)} for g in keys]
        first = answers[0] if answers else {"key": "", **found}
        return {"throttle_time_ms": 0, **{k: v for k, v in first.items() if k != "key"},
                "coordinators": answers}
