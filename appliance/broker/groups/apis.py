"""Wire handlers of the consumer-group APIs: request dicts in, response dicts out.

Each handler turns one version's layout into a call on the ``GroupCoordinator`` (member
state) or the ``OffsetStore`` (committed offsets) and the answer back into that version's
layout. A group id is either classic or a KIP-848 consumer group (``consumer_groups``):
the shared APIs (offsets, listing, deletion) go to whichever holds it, and the other
protocol's membership APIs are refused as Kafka refuses them. JoinGroup and SyncGroup may
return a future: the answer of a member parked in a
rebalance. When its connection goes away the server cancels that future, and the
cancellation reaches the coordinator, so a vanished member is no longer waited for.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from appliance.broker.acl import needs
from appliance.broker.acl.authorizer import Authorizer
from appliance.broker.acl.model import CLUSTER_NAME, Operation, ResourceType
from appliance.broker.caller import Caller
from appliance.broker.groups.consumer_groups import (
    PROTOCOL_TYPE as CONSUMER_TYPE,
)
from appliance.broker.groups.consumer_groups import (
    ConsumerGroup,
    ConsumerGroupCoordinator,
    HeartbeatRequest,
    TopicPartitions,
)
from appliance.broker.groups.coordinator import (
    GroupCoordinator,
    GroupState,
    JoinRequest,
    JoinResult,
    Protocol,
    SyncResult,
)
from appliance.broker.groups.offsets import Committed, OffsetKey, OffsetStore, OffsetStoreError
from appliance.broker.storage.topic_registry import TopicRegistry
from appliance.broker.wire import errors
from appliance.logs import get_logger

log = get_logger("appliance.broker")

# Kafka's offset.metadata.max.bytes: longer commit metadata is refused.
MAX_METADATA_CHARS = 4096
GROUP_TYPE = "classic"  # ListGroups v5's group type of the classic protocol's groups
# What DescribeGroups reports the caller may do to a group (all, without ACLs).
GROUP_OPERATIONS = (Operation.READ, Operation.DELETE, Operation.DESCRIBE)
NOT_REQUESTED = -2147483648


def _map_future(inner: asyncio.Future, render: Callable) -> asyncio.Future:
    """A future of ``render(inner's result)``; cancelling it cancels ``inner``."""
    out = inner.get_loop().create_future()

    def done(f: asyncio.Future) -> None:
        if out.done():
            return
        if f.cancelled():
            out.cancel()
        elif (failure := f.exception()) is not None:
            out.set_exception(failure)
        else:
            try:
                out.set_result(render(f.result()))
            except Exception as exc:  # surfaced to the connection, which logs and closes
                out.set_exception(exc)

    inner.add_done_callback(done)
    out.add_done_callback(lambda o: inner.cancel() if o.cancelled() else None)
    return out


def _respond(result, render: Callable):
    return _map_future(result, render) if isinstance(result, asyncio.Future) else render(
        result)


class GroupApis:
    def __init__(self, coordinator: GroupCoordinator, consumer: ConsumerGroupCoordinator,
                 offsets: OffsetStore, registry: TopicRegistry,
                 authorizer: Authorizer) -> None:
        self.coordinator = coordinator
        self.consumer = consumer
        self.offsets = offsets
        self.registry = registry
        self.authorizer = authorizer

    # -- membership -----------------------------------------------------------------------

    def join_group(self, version: int, req: dict, caller: Caller):
        if not self.authorizer.allows(caller, needs.JOIN_GROUP, req["group_id"]):
            return {"throttle_time_ms": 0, "error_code": errors.GROUP_AUTHORIZATION_FAILED,
                    "generation_id": -1, "protocol_type": None,
                    "protocol_name": None if version >= 7 else "", "leader": "",
                    "member_id": req["member_id"], "members": []}
        if self.consumer.has_group(req["group_id"]):  # a consumer group: not for JoinGroup
            return {"throttle_time_ms": 0, "error_code": errors.INCONSISTENT_GROUP_PROTOCOL,
                    "generation_id": -1, "protocol_type": None,
                    "protocol_name": None if version >= 7 else "", "leader": "",
                    "member_id": req["member_id"], "members": []}
        session = req["session_timeout_ms"]
        request = JoinRequest(
            group_id=req["group_id"], member_id=req["member_id"],
            instance_id=req["group_instance_id"], session_timeout_ms=session,
            rebalance_timeout_ms=req["rebalance_timeout_ms"] if version >= 1 else session,
            protocol_type=req["protocol_type"],
            protocols=tuple(Protocol(p["name"], bytes(p["metadata"]))
                            for p in req["protocols"]),
            require_known_member_id=version >= 4, can_skip_assignment=version >= 9,
            reason=req["reason"])

        def render(r: JoinResult) -> dict:
            return {"throttle_time_ms": 0, "error_code": r.error, "generation_id": r.generation,
                    "protocol_type": r.protocol_type,
                    # nullable only from v7: older clients read "" as "none chosen"
                    "protocol_name": r.protocol_name if version >= 7 else (
                        r.protocol_name or ""),
                    "leader": r.leader, "skip_assignment": r.skip_assignment,
                    "member_id": r.member_id,
                    "members": [{"member_id": m.member_id, "group_instance_id": m.instance_id,
                                 "metadata": m.metadata} for m in r.members]}

        return _respond(self.coordinator.join(request, caller), render)

    def sync_group(self, version: int, req: dict, caller: Caller):
        if not self.authorizer.allows(caller, needs.SYNC_GROUP, req["group_id"]):
            return {"throttle_time_ms": 0, "error_code": errors.GROUP_AUTHORIZATION_FAILED,
                    "protocol_type": None, "protocol_name": None, "assignment": b""}
        assignments = {a["member_id"]: bytes(a["assignment"]) for a in req["assignments"]}
        result = self.coordinator.sync(req["group_id"], req["generation_id"], req["member_id"],
                                       req["group_instance_id"], req["protocol_type"],
                                       req["protocol_name"], assignments)

        def render(r: SyncResult) -> dict:
            return {"throttle_time_ms": 0, "error_code": r.error,
                    "protocol_type": r.protocol_type, "protocol_name": r.protocol_name,
                    "assignment": r.assignment}

        return _respond(result, render)

    def heartbeat(self, version: int, req: dict, caller: Caller):
        if not self.authorizer.allows(caller, needs.HEARTBEAT, req["group_id"]):
            return {"throttle_time_ms": 0, "error_code": errors.GROUP_AUTHORIZATION_FAILED}
        return {"throttle_time_ms": 0, "error_code": self.coordinator.heartbeat(
            req["group_id"], req["generation_id"], req["member_id"],
            req["group_instance_id"])}

    def leave_group(self, version: int, req: dict, caller: Caller):
        if not self.authorizer.allows(caller, needs.LEAVE_GROUP, req["group_id"]):
            return {"throttle_time_ms": 0, "error_code": errors.GROUP_AUTHORIZATION_FAILED,
                    "members": []}
        identities: list[tuple[str, str | None]]
        if version < 3:
            identities = [(req["member_id"], None)]
        else:
            identities = [(m["member_id"], m["group_instance_id"]) for m in req["members"]]
        codes = self.coordinator.leave(req["group_id"], identities)
        if version < 3:
            return {"throttle_time_ms": 0, "error_code": codes[0], "members": []}
        return {"throttle_time_ms": 0, "error_code": errors.NONE,
                "members": [{"member_id": mid, "group_instance_id": iid, "error_code": code}
                            for (mid, iid), code in zip(identities, codes, strict=True)]}

    # -- offsets --------------------------------------------------------------------------

    def offset_commit(self, version: int, req: dict, caller: Caller):
        group = req["group_id"]
        authz = self.authorizer
        if not authz.allows(caller, needs.OFFSET_COMMIT_GROUP, group):
            error = errors.GROUP_AUTHORIZATION_FAILED
        elif not group:
            error = errors.INVALID_GROUP_ID
        elif self.consumer.has_group(group):  # v9+: generation_id is the member epoch
            error = self.consumer.check_commit(group, req["member_id"], req["generation_id"])
        else:
            error = self.coordinator.check_commit(
                group, req["generation_id"], req["member_id"], req["group_instance_id"])
        now = int(time.time() * 1000)
        entries: list[tuple[OffsetKey, Committed]] = []
        topics = []
        for t in req["topics"]:
            parts = []
            for p in t["partitions"]:
                index = p["partition_index"]
                metadata = p["committed_metadata"]
                if error:
                    code = error
                elif not authz.allows(caller, needs.OFFSET_COMMIT_TOPIC, t["name"]):
                    code = errors.TOPIC_AUTHORIZATION_FAILED
                elif self.registry.partition(t["name"], index) is None:
                    code = errors.UNKNOWN_TOPIC_OR_PARTITION
                elif metadata is not None and len(metadata) > MAX_METADATA_CHARS:
                    code = errors.OFFSET_METADATA_TOO_LARGE
                else:
                    code = errors.NONE
                    entries.append((OffsetKey(t["name"], index), Committed(
                        p["committed_offset"], p["committed_leader_epoch"], metadata, now)))
                parts.append({"partition_index": index, "error_code": code})
            topics.append({"name": t["name"], "partitions": parts})
        try:
            self.offsets.commit(group, entries)
        except OffsetStoreError as exc:  # nothing kept: the client retries
            log.error("broker.offsets_write_failed", group=group, error=str(exc))
            for t in topics:
                for part in t["partitions"]:
                    if part["error_code"] == errors.NONE:
                        part["error_code"] = errors.COORDINATOR_NOT_AVAILABLE
        return {"throttle_time_ms": 0, "topics": topics}

    def _fetch_group(self, caller: Caller, group: str,
                     wanted: list | None) -> tuple[list[dict], int]:
        if not group:
            return [], errors.INVALID_GROUP_ID
        authz = self.authorizer
        if not authz.allows(caller, needs.OFFSET_FETCH_GROUP, group):
            return [], errors.GROUP_AUTHORIZATION_FAILED
        if wanted is None:  # every partition with a committed offset it may describe
            wanted = [{"name": t, "partition_indexes": parts}
                      for t, parts in self.offsets.committed_topics(group).items()
                      if authz.allows(caller, needs.OFFSET_FETCH_ALL_TOPICS, t)]
        topics = []
        for t in wanted:
            parts = []
            allowed = authz.allows(caller, needs.OFFSET_FETCH_TOPIC, t["name"])
            for index in t["partition_indexes"]:
                c = self.offsets.fetch(group, t["name"], index) if allowed else None
                parts.append({"partition_index": index,
                              "committed_offset": c.offset if c else -1,
                              "committed_leader_epoch": c.leader_epoch if c else -1,
                              "metadata": (c.metadata if c else ""),
                              "error_code": errors.NONE if allowed
                              else errors.TOPIC_AUTHORIZATION_FAILED})
            topics.append({"name": t["name"], "partitions": parts})
        return topics, errors.NONE

    def offset_fetch(self, version: int, req: dict, caller: Caller):
        if version >= 8:
            groups = []
            for g in req["groups"]:
                error = self.consumer.check_fetch(g["group_id"], g.get("member_id"),
                                                  g.get("member_epoch", -1))
                if error:
                    groups.append({"group_id": g["group_id"], "topics": [],
                                   "error_code": error})
                    continue
                topics, error = self._fetch_group(caller, g["group_id"], g["topics"])
                groups.append({"group_id": g["group_id"], "topics": topics,
                               "error_code": error})
            return {"throttle_time_ms": 0, "groups": groups}
        topics, error = self._fetch_group(caller, req["group_id"], req["topics"])
        return {"throttle_time_ms": 0, "error_code": error, "topics": topics}

    def offset_delete(self, version: int, req: dict, caller: Caller):
        group = req["group_id"]
        if not self.authorizer.allows(caller, needs.OFFSET_DELETE_GROUP, group):
            return {"error_code": errors.GROUP_AUTHORIZATION_FAILED, "throttle_time_ms": 0,
                    "topics": []}
        if not group or not (self.coordinator.has_group(group)
                             or self.consumer.has_group(group)):
            return {"error_code": errors.INVALID_GROUP_ID if not group
                    else errors.GROUP_ID_NOT_FOUND, "throttle_time_ms": 0, "topics": []}
        gone: list[OffsetKey] = []
        topics = []
        for t in req["topics"]:
            subscribed = (self.coordinator.subscribes_to(group, t["name"])
                          or self.consumer.subscribes_to(group, t["name"]))
            parts = []
            for p in t["partitions"]:
                index = p["partition_index"]
                if not self.authorizer.allows(caller, needs.OFFSET_DELETE_TOPIC, t["name"]):
                    code = errors.TOPIC_AUTHORIZATION_FAILED
                elif subscribed:
                    code = errors.GROUP_SUBSCRIBED_TO_TOPIC
                elif self.registry.partition(t["name"], index) is None:
                    code = errors.UNKNOWN_TOPIC_OR_PARTITION
                else:
                    code = errors.NONE
                    gone.append(OffsetKey(t["name"], index))
                parts.append({"partition_index": index, "error_code": code})
            topics.append({"name": t["name"], "partitions": parts})
        self.offsets.delete_offsets(group, gone)
        return {"error_code": errors.NONE, "throttle_time_ms": 0, "topics": topics}

    # -- administration -------------------------------------------------------------------

    def describe_groups(self, version: int, req: dict, caller: Caller):
        authz = self.authorizer
        out = []
        for group_id in req["groups"]:
            if not authz.allows(caller, needs.DESCRIBE_GROUPS, group_id):
                out.append({"error_code": errors.GROUP_AUTHORIZATION_FAILED,
                            "group_id": group_id, "group_state": "", "protocol_type": "",
                            "protocol_data": "", "members": [],
                            "authorized_operations": NOT_REQUESTED})
                continue
            ops = authz.authorized_operations(caller, ResourceType.GROUP, group_id,
                                              GROUP_OPERATIONS) if req[
                "include_authorized_operations"] else NOT_REQUESTED
            s = self.coordinator.describe(group_id)
            out.append({
                "error_code": errors.NONE if group_id else errors.INVALID_GROUP_ID,
                "group_id": group_id, "group_state": s.state.value,
                "protocol_type": s.protocol_type, "protocol_data": s.protocol_name,
                "members": [{"member_id": m.member_id, "group_instance_id": m.instance_id,
                             "client_id": m.client_id, "client_host": m.client_host,
                             "member_metadata": m.metadata,
                             "member_assignment": m.assignment} for m in s.members],
                "authorized_operations": ops if s.state is not GroupState.DEAD
                else NOT_REQUESTED})
        return {"throttle_time_ms": 0, "groups": out}

    def list_groups(self, version: int, req: dict, caller: Caller):
        states = {s.lower() for s in req["states_filter"] or ()}
        types = {t.lower() for t in req["types_filter"] or ()}
        authz = self.authorizer
        every = authz.allows(caller, needs.LIST_GROUPS_CLUSTER, CLUSTER_NAME)
        listed = []
        if not types or GROUP_TYPE in types:
            listed += [(s.group_id, s.protocol_type, s.state.value, GROUP_TYPE)
                       for s in self.coordinator.listed()]
        if not types or CONSUMER_TYPE in types:
            listed += [(g.group_id, CONSUMER_TYPE, g.state().value, CONSUMER_TYPE)
                       for g in self.consumer.listed()]
        groups = [{"group_id": group_id, "protocol_type": protocol_type,
                   "group_state": state, "group_type": group_type}
                  for group_id, protocol_type, state, group_type in sorted(listed)
                  if (not states or state.lower() in states)
                  and (every or authz.allows(caller, needs.LIST_GROUPS_GROUP, group_id))]
        return {"throttle_time_ms": 0, "error_code": errors.NONE, "groups": groups}

    def delete_groups(self, version: int, req: dict, caller: Caller):
        return {"throttle_time_ms": 0, "results": [
            {"group_id": g, "error_code": self._delete_group(g)
             if self.authorizer.allows(caller, needs.DELETE_GROUPS, g)
             else errors.GROUP_AUTHORIZATION_FAILED}
            for g in req["groups_names"]]}

    def _delete_group(self, group_id: str) -> int:
        if self.consumer.has_group(group_id):
            return self.consumer.delete(group_id)
        return self.coordinator.delete(group_id)

    # -- KIP-848 consumer groups ----------------------------------------------------------

    def _topic_names(self) -> dict[bytes, str]:
        return {t.topic_id: name for name, t in self.registry.topics.items()}

    def consumer_group_heartbeat(self, version: int, req: dict, caller: Caller):
        group_id, member_id = req["group_id"], req["member_id"]

        def refused(code: int, message: str) -> dict:
            return {"throttle_time_ms": 0, "error_code": code, "error_message": message,
                    "member_id": None, "member_epoch": -1, "heartbeat_interval_ms": 0,
                    "assignment": None}

        if not self.authorizer.allows(caller, needs.CONSUMER_GROUP_HEARTBEAT, group_id):
            return refused(errors.GROUP_AUTHORIZATION_FAILED,
                           f"not authorized to read group {group_id}")
        if group_id and not self.consumer.has_group(group_id) and (
                not self.coordinator.give_up_empty(group_id)):
            return refused(errors.GROUP_ID_NOT_FOUND,
                           f"Group {group_id} is not a consumer group: it is a classic "
                           "group with members (group.protocol=classic)")
        owned: TopicPartitions | None = None
        if req["topic_partitions"] is not None:
            names = self._topic_names()
            owned = {names[t["topic_id"]]: frozenset(t["partitions"])
                     for t in req["topic_partitions"] if t["topic_id"] in names}
        names_in = req["subscribed_topic_names"]
        result = self.consumer.heartbeat(HeartbeatRequest(
            group_id=group_id, member_id=member_id, member_epoch=req["member_epoch"],
            instance_id=req["instance_id"], rack_id=req["rack_id"],
            rebalance_timeout_ms=req["rebalance_timeout_ms"],
            subscribed_topic_names=tuple(names_in) if names_in is not None else None,
            subscribed_topic_regex=req.get("subscribed_topic_regex"),
            server_assignor=req["server_assignor"], owned=owned,
            member_id_from_client=version >= 1), caller)
        assignment = None
        if result.assignment is not None:
            topics = self.registry.topics
            assignment = {"topic_partitions": [
                {"topic_id": topics[t].topic_id, "partitions": sorted(parts)}
                for t, parts in sorted(result.assignment.items()) if t in topics and parts]}
        return {"throttle_time_ms": 0, "error_code": result.error,
                "error_message": result.message, "member_id": result.member_id,
                "member_epoch": result.member_epoch if not result.error else -1,
                "heartbeat_interval_ms": result.heartbeat_interval_ms,
                "assignment": assignment}

    def _described(self, tp: TopicPartitions) -> dict:
        topics = self.registry.topics
        return {"topic_partitions": [
            {"topic_id": topics[t].topic_id, "topic_name": t, "partitions": sorted(parts)}
            for t, parts in sorted(tp.items()) if t in topics and parts]}

    def _describe_consumer_group(self, group: ConsumerGroup) -> dict:
        return {"error_code": errors.NONE, "error_message": None, "group_id": group.group_id,
                "group_state": group.state().value, "group_epoch": group.epoch,
                "assignment_epoch": group.assignment_epoch, "assignor_name": group.assignor,
                "members": [{
                    "member_id": m.member_id, "instance_id": m.instance_id,
                    "rack_id": m.rack_id, "member_epoch": m.epoch, "client_id": m.client_id,
                    "client_host": m.client_host,
                    "subscribed_topic_names": list(m.subscribed_names),
                    "subscribed_topic_regex": m.subscribed_regex,
                    "assignment": self._described(m.assigned),
                    "target_assignment": self._described(group.target.get(m.member_id, {})),
                    "member_type": 1,  # a consumer-protocol member (0 would be classic)
                } for m in group.members.values()]}

    def consumer_group_describe(self, version: int, req: dict, caller: Caller):
        authz = self.authorizer
        out = []
        for group_id in req["group_ids"]:
            empty = {"group_id": group_id, "group_state": "", "group_epoch": -1,
                     "assignment_epoch": -1, "assignor_name": "", "members": [],
                     "authorized_operations": NOT_REQUESTED}
            if not authz.allows(caller, needs.CONSUMER_GROUP_DESCRIBE, group_id):
                out.append({**empty, "error_code": errors.GROUP_AUTHORIZATION_FAILED,
                            "error_message": None})
                continue
            group = self.consumer.get(group_id)
            if group is None:
                kind = "a classic group" if self.coordinator.has_group(group_id) else (
                    "unknown")
                out.append({**empty, "error_code": errors.GROUP_ID_NOT_FOUND,
                            "error_message": f"Group {group_id} is not a consumer group "
                                             f"({kind})."})
                continue
            described = self._describe_consumer_group(group)
            described["authorized_operations"] = authz.authorized_operations(
                caller, ResourceType.GROUP, group_id, GROUP_OPERATIONS) if req[
                "include_authorized_operations"] else NOT_REQUESTED
            out.append(described)
        return {"throttle_time_ms": 0, "groups": out}
