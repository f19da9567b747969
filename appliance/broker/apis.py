"""Request handlers: one method per Kafka API, decoded request dict in, response dict out.

Fetch may instead return a future (a long-poll); every other handler answers at once.
Produce with acks=0 returns None: Kafka sends no response for it.
"""

from __future__ import annotations

import asyncio
import time

from appliance.broker import errors, schemas
from appliance.broker.config import BrokerConfig
from appliance.broker.fetch_wait import FetchWait
from appliance.broker.group_offsets import OffsetStore
from appliance.broker.partition import LEADER_EPOCH
from appliance.broker.records import BatchError, split_batches
from appliance.broker.topics import TopicError, TopicRegistry

NO_GROUPS = ("consumer group membership is not supported by this broker; "
             "use assign() (committing offsets works)")
NO_TRANSACTIONS = "transactions are not supported by this broker"


def _now_ms() -> int:
    return int(time.time() * 1000)


class Apis:
    def __init__(self, config: BrokerConfig, registry: TopicRegistry, storage=None) -> None:
        self.config = config
        self.registry = registry
        self.storage = storage
        self.advertised_host = config.host if config.host not in ("0.0.0.0", "") else "127.0.0.1"
        self.advertised_port = config.port
        # Producer ids never repeat across restarts, even in memory where no state survives:
        # a reused id would mix two producers' sequence numbers.
        self._next_pid = max(registry.max_producer_id() + 1, _now_ms())
        self._pid_epochs: dict[int, int] = {}
        self.offsets = OffsetStore(config.data_dir)
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
            schemas.OFFSET_COMMIT.key: self.offset_commit,
            schemas.OFFSET_FETCH.key: self.offset_fetch,
            schemas.DESCRIBE_GROUPS.key: self.describe_groups,
            schemas.LIST_GROUPS.key: self.list_groups,
            schemas.JOIN_GROUP.key: self.join_group,
            schemas.HEARTBEAT.key: self.heartbeat,
            schemas.LEAVE_GROUP.key: self.leave_group,
            schemas.SYNC_GROUP.key: self.sync_group,
        }

    # -- ApiVersions / Metadata ---------------------------------------------------------

    @staticmethod
    def api_version_list() -> list[dict]:
        return [{"api_key": s.key, "min_version": s.min_version, "max_version": s.max_version}
                for s in schemas.ALL]

    def api_versions(self, version: int, req: dict):
        return {"error_code": errors.NONE, "api_keys": self.api_version_list(),
                "throttle_time_ms": 0}

    def _partition_meta(self, index: int) -> dict:
        node = self.config.node_id
        return {"error_code": 0, "partition_index": index, "leader_id": node,
                "leader_epoch": LEADER_EPOCH, "replica_nodes": [node], "isr_nodes": [node],
                "offline_replicas": []}

    def _topic_meta(self, topic) -> dict:
        return {"error_code": 0, "name": topic.name, "topic_id": topic.topic_id,
                "is_internal": False,
                "partitions": [self._partition_meta(i) for i in range(len(topic.partitions))]}

    def metadata(self, version: int, req: dict):
        reg = self.registry
        wanted = req["topics"]
        out = []
        if wanted is None:
            out = [self._topic_meta(t) for t in reg.topics.values()]
        else:
            by_id = {t.topic_id: t for t in reg.topics.values()}
            for item in wanted:
                name = item["name"]
                if name is None:
                    topic = by_id.get(item.get("topic_id") or b"")
                elif req["allow_auto_topic_creation"]:
                    topic = reg.maybe_auto_create(name)
                else:
                    topic = reg.topics.get(name)
                if topic is None:
                    out.append({"error_code": errors.UNKNOWN_TOPIC_OR_PARTITION, "name": name,
                                "topic_id": item.get("topic_id"), "is_internal": False,
                                "partitions": []})
                else:
                    out.append(self._topic_meta(topic))
        node = self.config.node_id
        return {"throttle_time_ms": 0,
                "brokers": [{"node_id": node, "host": self.advertised_host,
                             "port": self.advertised_port, "rack": None}],
                "cluster_id": self.config.cluster_id, "controller_id": node, "topics": out}

    # -- Produce ------------------------------------------------------------------------

    def produce(self, version: int, req: dict):
        acks = req["acks"]
        now = _now_ms()
        responses = []
        for t in req["topic_data"]:
            name = t["name"]
            topic = self.registry.maybe_auto_create(name)
            max_msg = self.registry.limits(topic).max_message_bytes if topic is not None else 0
            parts = []
            for pd in t["partition_data"]:
                index = pd["index"]
                err, base, msg, log_start = errors.NONE, -1, None, -1
                partition = (topic.partitions[index]
                             if topic is not None and 0 <= index < len(topic.partitions)
                             else None)
                if acks not in (-1, 0, 1):
                    err, msg = errors.INVALID_REQUIRED_ACKS, f"acks={acks} (use -1, 0 or 1)"
                elif partition is None:
                    err = errors.UNKNOWN_TOPIC_OR_PARTITION
                    msg = f"unknown topic-partition {name}-{index}"
                else:
                    records = pd["records"]
                    try:
                        if not records:
                            raise BatchError("empty record set")
                        headers = split_batches(records)
                    except BatchError as exc:
                        err, msg = errors.CORRUPT_MESSAGE, str(exc)
                    else:
                        err, base, msg = partition.append(records, headers, now, max_msg)
                    log_start = partition.log_start_offset
                parts.append({"index": index, "error_code": err, "base_offset": base,
                              "log_append_time_ms": -1, "log_start_offset": log_start,
                              "record_errors": [], "error_message": msg})
            responses.append({"name": name, "partition_responses": parts})
        if acks == 0:
            return None
        return {"responses": responses, "throttle_time_ms": 0}

    # -- Fetch ------------------------------------------------------------------------

    def _fetch_now(self, req: dict, found: list | None = None) -> tuple[dict, int, bool]:
        """(response as of now, its record bytes, whether any partition has an error).

        ``found`` collects the partitions read: what a long-poll waits on.
        """
        budget = req["max_bytes"] if req["max_bytes"] > 0 else 0x7FFFFFFF
        total = 0
        failed = False
        read_committed = req["isolation_level"] == 1
        responses = []
        for t in req["topics"]:
            name = t["topic"]
            topic = self.registry.topics.get(name)
            parts = []
            for p in t["partitions"]:
                index = p["partition"]
                partition = (topic.partitions[index]
                             if topic is not None and 0 <= index < len(topic.partitions)
                             else None)
                if partition is None:
                    failed = True
                    parts.append({"partition_index": index,
                                  "error_code": errors.UNKNOWN_TOPIC_OR_PARTITION,
                                  "high_watermark": -1, "last_stable_offset": -1,
                                  "log_start_offset": -1, "aborted_transactions": None,
                                  "records": b""})
                    continue
                limit = min(max(p["partition_max_bytes"], 0), max(budget - total, 0))
                err, batches, n = partition.read(p["fetch_offset"], limit,
                                                 at_least_one=total == 0)
                failed = failed or err != errors.NONE
                if found is not None:
                    found.append(partition)
                total += n
                hwm = partition.high_watermark
                parts.append({"partition_index": index, "error_code": err,
                              "high_watermark": hwm, "last_stable_offset": hwm,
                              "log_start_offset": partition.log_start_offset,
                              "aborted_transactions": [] if read_committed else None,
                              "preferred_read_replica": -1, "records": batches})
            responses.append({"topic": name, "partitions": parts})
        return ({"throttle_time_ms": 0, "error_code": 0, "session_id": 0,
                 "responses": responses}, total, failed)

    def fetch(self, version: int, req: dict):
        partitions: list = []
        resp, total, failed = self._fetch_now(req, partitions)
        wait_ms = req["max_wait_ms"]
        if total >= req["min_bytes"] or wait_ms <= 0 or failed or not partitions:
            return resp
        waiter = FetchWait(asyncio.get_running_loop(), partitions, req["min_bytes"] - total,
                           wait_ms, lambda: self._fetch_now(req)[0])
        return waiter.future

    # -- ListOffsets --------------------------------------------------------------------

    def list_offsets(self, version: int, req: dict):
        topics = []
        for t in req["topics"]:
            parts = []
            for p in t["partitions"]:
                partition = self.registry.partition(t["name"], p["partition_index"])
                out = {"partition_index": p["partition_index"], "error_code": 0,
                       "timestamp": -1, "offset": -1, "leader_epoch": LEADER_EPOCH}
                ts = p["timestamp"]
                if partition is None:
                    out.update(error_code=errors.UNKNOWN_TOPIC_OR_PARTITION, leader_epoch=-1)
                elif ts == -2:
                    out["offset"] = partition.log_start_offset
                elif ts == -1:
                    out["offset"] = partition.high_watermark
                elif ts < 0:
                    out["error_code"] = errors.UNSUPPORTED_VERSION
                else:
                    out["offset"], out["timestamp"] = partition.offset_for_timestamp(ts)
                out["old_style_offsets"] = [out["offset"]] if out["offset"] >= 0 else []
                parts.append(out)
            topics.append({"name": t["name"], "partitions": parts})
        return {"throttle_time_ms": 0, "topics": topics}

    # -- topic administration -----------------------------------------------------------

    def create_topics(self, version: int, req: dict):
        out = []
        for t in req["topics"]:
            res = {"name": t["name"], "error_code": 0, "error_message": None,
                   "num_partitions": -1, "replication_factor": -1, "configs": []}
            try:
                count = t["num_partitions"]
                if t["assignments"]:
                    if count != -1 or t["replication_factor"] != -1:
                        raise TopicError(errors.INVALID_REQUEST,
                                         "give either assignments or partitions/replication")
                    count = len(t["assignments"])
                elif t["replication_factor"] not in (-1, 1):
                    raise TopicError(errors.INVALID_REPLICATION_FACTOR,
                                     "single-broker cluster: replication factor must be 1")
                configs = {c["name"]: c["value"] for c in t["configs"]}
                topic = self.registry.create(t["name"], count, configs,
                                             validate_only=req["validate_only"])
                res.update(num_partitions=len(topic.partitions) or (
                    count if count > 0 else self.config.default_partitions),
                    replication_factor=1)
                res["configs"] = [{"name": k, "value": v, "read_only": False,
                                   "config_source": 1, "is_sensitive": False}
                                  for k, v in topic.configs.items()]
            except TopicError as exc:
                res.update(error_code=exc.code, error_message=exc.message)
            out.append(res)
        return {"throttle_time_ms": 0, "topics": out}

    def delete_topics(self, version: int, req: dict):
        out = []
        for name in req["topic_names"]:
            res = {"name": name, "error_code": 0, "error_message": None}
            try:
                self.registry.delete(name)
                self.offsets.forget_topic(name)
            except TopicError as exc:
                res.update(error_code=exc.code, error_message=exc.message)
            out.append(res)
        return {"throttle_time_ms": 0, "responses": out}

    def create_partitions(self, version: int, req: dict):
        out = []
        for t in req["topics"]:
            res = {"name": t["name"], "error_code": 0, "error_message": None}
            try:
                self.registry.add_partitions(t["name"], t["count"], req["validate_only"])
            except TopicError as exc:
                res.update(error_code=exc.code, error_message=exc.message)
            out.append(res)
        return {"throttle_time_ms": 0, "results": out}

    # -- producers and (absent) groups ---------------------------------------------------

    def init_producer_id(self, version: int, req: dict):
        if req["transactional_id"] is not None:
            return {"throttle_time_ms": 0,
                    "error_code": errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
        pid, epoch = req["producer_id"], req["producer_epoch"]
        if pid >= 0 and self._pid_epochs.get(pid) == epoch and epoch < 32766:
            self._pid_epochs[pid] = epoch + 1  # epoch bump after a client-side error
            return {"throttle_time_ms": 0, "error_code": 0, "producer_id": pid,
                    "producer_epoch": epoch + 1}
        pid = self._next_pid
        self._next_pid += 1
        self._pid_epochs[pid] = 0
        return {"throttle_time_ms": 0, "error_code": 0, "producer_id": pid, "producer_epoch": 0}

    def find_coordinator(self, version: int, req: dict):
        """Groups (key_type 0) are coordinated here, for offsets; transactions nowhere."""
        node, host, port = self.config.node_id, self.advertised_host, self.advertised_port
        if req["key_type"] == 0:
            found = {"error_code": 0, "error_message": None, "node_id": node, "host": host,
                     "port": port}
        else:
            found = {"error_code": errors.COORDINATOR_NOT_AVAILABLE,
                     "error_message": NO_TRANSACTIONS, "node_id": -1, "host": "", "port": -1}
        keys = req["coordinator_keys"] or []
        return {"throttle_time_ms": 0, **found,
                "coordinators": [{"key": k, **found} for k in keys]}

    def offset_commit(self, version: int, req: dict):
        # Only "simple" commits (no group generation) exist here: there are no members.
        member = req["generation_id"] not in (-1, 0) or req["member_id"]
        topics = []
        for t in req["topics"]:
            topic = self.registry.topics.get(t["name"])
            parts = []
            for p in t["partitions"]:
                index = p["partition_index"]
                if member:
                    err = errors.UNKNOWN_MEMBER_ID
                elif topic is None or not 0 <= index < len(topic.partitions):
                    err = errors.UNKNOWN_TOPIC_OR_PARTITION
                else:
                    err = errors.NONE
                    self.offsets.commit(req["group_id"], t["name"], index,
                                        p["committed_offset"], p["committed_leader_epoch"],
                                        p["committed_metadata"])
                parts.append({"partition_index": index, "error_code": err})
            topics.append({"name": t["name"], "partitions": parts})
        self.offsets.save()
        return {"throttle_time_ms": 0, "topics": topics}

    def offset_fetch(self, version: int, req: dict):
        group = req["group_id"]
        wanted = req["topics"]
        if wanted is None:  # v2+: every partition with a committed offset
            wanted = [{"name": t, "partition_indexes": parts}
                      for t, parts in self.offsets.committed_topics(group).items()]
        topics = []
        for t in wanted:
            parts = []
            for index in t["partition_indexes"]:
                offset, epoch, metadata = self.offsets.fetch(group, t["name"], index)
                parts.append({"partition_index": index, "committed_offset": offset,
                              "committed_leader_epoch": epoch, "metadata": metadata,
                              "error_code": 0})
            topics.append({"name": t["name"], "partitions": parts})
        return {"throttle_time_ms": 0, "error_code": 0, "topics": topics}

    # Group membership is out of scope: those operations report "no coordinator".

    # Each membership API answers COORDINATOR_NOT_AVAILABLE with exactly its own response
    # fields (strict encoding refuses keys another API's schema has).
    def group_error(self, version: int, req: dict):
        return {"throttle_time_ms": 0, "error_code": errors.COORDINATOR_NOT_AVAILABLE}

    def join_group(self, version: int, req: dict):
        return {**self.group_error(version, req), "generation_id": -1, "protocol_name": "",
                "leader": "", "member_id": "", "members": []}

    def heartbeat(self, version: int, req: dict):
        return self.group_error(version, req)

    def leave_group(self, version: int, req: dict):
        return {**self.group_error(version, req), "members": []}

    def sync_group(self, version: int, req: dict):
        return {**self.group_error(version, req), "assignment": b""}

    def describe_groups(self, version: int, req: dict):
        return {"throttle_time_ms": 0, "groups": [
            {"error_code": errors.COORDINATOR_NOT_AVAILABLE, "group_id": g, "group_state": "",
             "protocol_type": "", "protocol_data": "", "members": []} for g in req["groups"]]}

    def list_groups(self, version: int, req: dict):
        return {"throttle_time_ms": 0, "error_code": 0, "groups": []}  # truly none exist
