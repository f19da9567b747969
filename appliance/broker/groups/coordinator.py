"""The group coordinator: Kafka's classic group membership as a state machine.

Why the broker needs one: nearly every downstream consumer (alert forwarders, Kafka
Connect sinks, ``kcat -G``) is written with ``group.id`` + ``subscribe()``, which needs a
coordinator to share a topic's partitions among the members and move them when a member
comes, goes or dies. The broker never looks inside an assignment: the members' metadata
(their subscriptions, in their chosen assignor's format) goes to the elected leader, the
leader's assignment comes back and is handed out. So range, round-robin, sticky and
cooperative-sticky all work, and so does any other assignor a client brings.

States, as in Kafka::

    Empty --join--> PreparingRebalance --all joined / rebalance timeout--> CompletingRebalance
    CompletingRebalance --leader's SyncGroup--> Stable
    Stable|CompletingRebalance --join of a new or changed member, leave, session expiry,
                                  partitions added to a subscribed topic--> PreparingRebalance
    PreparingRebalance --nobody left--> Empty

Bounded like Kafka's: at most ``max_groups`` groups (a new one beyond is refused
GROUP_MAX_SIZE_REACHED), ``group_max_size`` members per group (Kafka's group.max.size,
same error), and ``group_max_metadata_bytes`` of members' metadata and assignments per
group (Kafka stores a group as one record of its offsets topic; past its size Kafka
answers UNKNOWN_SERVER_ERROR, so does this broker, logging
``broker.group_metadata_too_large``). A group without members expires, with its
committed offsets, ``offsets_retention_ms`` after it became empty or last committed,
whichever is later (Kafka's offsets.retention.minutes): an OffsetCommit with no
membership no longer creates a group for ever.

JoinGroup and SyncGroup answers wait (futures: the server sends them when resolved, in
order on their connection) until the rebalance reaches them. Members are kept alive by
their requests within their session timeout; a member waiting for a JoinGroup or SyncGroup
answer is alive by definition. Static members (``group.instance.id``, KIP-345) keep their
identity across restarts: a rejoin with the same instance id takes over the old member id
(fencing the old one with FENCED_INSTANCE_ID) without a rebalance when nothing changed.

A broker restart keeps a stable group's members (``offsets`` holds its last stable
state, as Kafka's offsets topic holds a group's metadata record): the group comes back
Stable in its generation, each member's session starting afresh with the broker's first
tick, so members that heartbeat within it keep their assignment and no rebalance moves a
partition (an active/standby pair elected through a group keeps its active). A member
that does not come back expires after its session, as any other.

This module knows groups and members only; the wire (versions, response layouts) is
``apis``, the committed offsets ``offsets``.
"""

from __future__ import annotations

import asyncio
import base64
import enum
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

from appliance.broker.caller import Caller
from appliance.broker.groups.consumer_protocol import PROTOCOL_TYPE, subscribed_topics
from appliance.broker.groups.group_cap import room_for_group
from appliance.broker.groups.offsets import OffsetStore
from appliance.broker.groups.timers import rearm
from appliance.broker.settings import BrokerConfig
from appliance.broker.wire import errors
from appliance.logs import get_logger

log = get_logger("appliance.broker")


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"  # reported for a group that does not exist


class Protocol(NamedTuple):
    name: str
    metadata: bytes


class JoinedMember(NamedTuple):
    member_id: str
    instance_id: str | None
    metadata: bytes


class JoinRequest(NamedTuple):
    group_id: str
    member_id: str
    instance_id: str | None
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[Protocol, ...]
    require_known_member_id: bool  # JoinGroup v4+: MEMBER_ID_REQUIRED round trip
    can_skip_assignment: bool  # JoinGroup v9+: a static leader's rejoin skips the assignor
    reason: str | None = None


class JoinResult(NamedTuple):
    error: int
    generation: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    member_id: str = ""
    members: tuple[JoinedMember, ...] = ()
    skip_assignment: bool = False


class SyncResult(NamedTuple):
    error: int
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


class MemberSummary(NamedTuple):
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


class GroupSummary(NamedTuple):
    group_id: str
    state: GroupState
    protocol_type: str
    protocol_name: str
    generation: int
    members: tuple[MemberSummary, ...]


@dataclass(eq=False)
class Member:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[Protocol, ...]
    assignment: bytes = b""
    join_waiter: asyncio.Future | None = None
    sync_waiter: asyncio.Future | None = None
    session_timer: asyncio.TimerHandle | None = None

    def awaiting_join(self) -> bool:
        return self.join_waiter is not None and not self.join_waiter.done()

    def awaiting_sync(self) -> bool:
        return self.sync_waiter is not None and not self.sync_waiter.done()

    def metadata_for(self, protocol: str | None) -> bytes:
        for p in self.protocols:
            if p.name == protocol:
                return p.metadata
        return b""


@dataclass(eq=False)
class Group:
    group_id: str
    state: GroupState = GroupState.EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    pending: dict[str, asyncio.TimerHandle] = field(default_factory=dict)
    static: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    join_timer: asyncio.TimerHandle | None = None
    empty_since_ms: int = field(default_factory=lambda: int(time.time() * 1000))
    initial_delay: bool = False  # waiting out group.initial.rebalance.delay.ms
    new_member_joined: bool = False  # during that delay
    rebalances: int = 0  # completed (reached Stable), for metrics
    counted: int = 0  # metadata_bytes() as last added to the coordinator's total

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def candidate_protocols(self) -> set[str]:
        """Protocols every member supports."""
        sets = [{p.name for p in m.protocols} for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def supports(self, protocol_type: str, protocols: Iterable[Protocol]) -> bool:
        if not self.members:
            return bool(protocol_type)
        names = {p.name for p in protocols}
        return protocol_type == self.protocol_type and bool(self.candidate_protocols() & names)

    def metadata_bytes(self) -> int:
        """What the members' metadata and assignments hold (the group's stored size)."""
        return sum(len(p.metadata) for m in self.members.values() for p in m.protocols) + sum(
            len(m.assignment) for m in self.members.values())

    def subscribed_topics(self) -> frozenset[str]:
        if self.protocol_type != PROTOCOL_TYPE:
            return frozenset()
        out: set[str] = set()
        for m in self.members.values():
            out |= subscribed_topics(m.metadata_for(self.protocol_name or m.protocols[0].name))
        return frozenset(out)

    def all_joined(self) -> bool:
        return not self.pending and all(m.awaiting_join() for m in self.members.values())


def _answer(waiter: asyncio.Future | None, result) -> None:
    if waiter is not None and not waiter.done():
        waiter.set_result(result)


class GroupCoordinator:
    def __init__(self, config: BrokerConfig, offsets: OffsetStore,
                 other_groups: Callable[[], int] = lambda: 0,
                 other_metadata: Callable[[], int] = lambda: 0) -> None:
        self.config = config
        self.offsets = offsets
        self.other_groups = other_groups  # KIP-848 groups: --max-groups counts both kinds
        # ... and their subscriptions: --groups-max-metadata-bytes counts both kinds too
        self.other_metadata = other_metadata
        self.groups: dict[str, Group] = {}
        self.metadata_total = 0  # every group's members' metadata and assignments
        consumer = offsets.consumer_groups()  # KIP-848's: consumer_groups restores those
        self._unarmed: list[tuple[Group, Member]] = []  # restored: no session timer yet
        for group_id in offsets.groups():  # groups survive a restart with their offsets
            if group_id in consumer:
                continue
            record = offsets.group_record(group_id)
            group = self.groups[group_id] = Group(
                group_id, generation=record.generation if record else 0,
                protocol_type=record.protocol_type if record else None)
            if record is not None and record.stable:
                self._restore_stable(group, record.stable)

    # -- a stable group across a restart ----------------------------------------------------

    @staticmethod
    def _stable_snapshot(group: Group) -> dict:
        """What ``_restore_stable`` needs of a stable group (JSON: bytes as base64)."""
        def b64(data: bytes) -> str:
            return base64.b64encode(data).decode("ascii")
        return {"protocol": group.protocol_name, "leader": group.leader_id, "members": [
            [m.member_id, m.instance_id, m.client_id, m.client_host, m.session_timeout_ms,
             m.rebalance_timeout_ms, [[p.name, b64(p.metadata)] for p in m.protocols],
             b64(m.assignment)] for m in group.members.values()]}

    def _restore_stable(self, group: Group, snapshot: dict) -> None:
        for (member_id, instance_id, client_id, client_host, session_ms, rebalance_ms,
             protocols, assignment) in snapshot["members"]:
            member = group.members[member_id] = Member(
                member_id, instance_id, client_id, client_host, session_ms, rebalance_ms,
                group.protocol_type or "",
                tuple(Protocol(n, base64.b64decode(m)) for n, m in protocols),
                assignment=base64.b64decode(assignment))
            if instance_id is not None:
                group.static[instance_id] = member_id
            self._unarmed.append((group, member))
        if group.members:
            group.state = GroupState.STABLE
            group.protocol_name = snapshot["protocol"]
            group.leader_id = snapshot["leader"]
            self._account(group)
            log.info("broker.group_restored", group=group.group_id,
                     generation=group.generation, members=len(group.members))

    def _arm_restored(self) -> None:
        """Restored members' sessions start with the first call on the event loop (the
        broker's first tick, or a member's first request): each has its whole session
        from then to heartbeat again."""
        unarmed, self._unarmed = self._unarmed, []
        for group, member in unarmed:
            if group.members.get(member.member_id) is member:
                self._touch(group, member)

    # -- JoinGroup ------------------------------------------------------------------------

    def join(self, req: JoinRequest, caller: Caller) -> JoinResult | asyncio.Future:
        c = self.config
        self._arm_restored()
        if not req.group_id:
            return JoinResult(errors.INVALID_GROUP_ID, member_id=req.member_id)
        if not (c.group_min_session_timeout_ms <= req.session_timeout_ms
                <= c.group_max_session_timeout_ms):
            return JoinResult(errors.INVALID_SESSION_TIMEOUT, member_id=req.member_id)
        if not req.protocol_type or not req.protocols:
            return JoinResult(errors.INCONSISTENT_GROUP_PROTOCOL, member_id=req.member_id)
        group = self.groups.get(req.group_id)
        if group is None:
            if req.member_id:
                return JoinResult(errors.UNKNOWN_MEMBER_ID, member_id=req.member_id)
            if not self._room_for_group(req.group_id):
                return JoinResult(errors.GROUP_MAX_SIZE_REACHED, member_id=req.member_id)
            group = self.groups[req.group_id] = Group(req.group_id)
        if not group.supports(req.protocol_type, req.protocols):
            return JoinResult(errors.INCONSISTENT_GROUP_PROTOCOL, member_id=req.member_id)
        current = group.members.get(req.member_id)
        joining = sum(len(p.metadata) for p in req.protocols) - (
            sum(len(p.metadata) for p in current.protocols) if current else 0)
        refused = self._metadata_refusal(req.group_id, group.metadata_bytes() + joining,
                                         joining)
        if refused is not None:
            return JoinResult(refused, member_id=req.member_id)
        if current is None and (len(group.members) + len(group.pending)
                                >= c.group_max_size) and not (
                req.member_id in group.pending or (
                    req.instance_id is not None and req.instance_id in group.static)):
            return JoinResult(errors.GROUP_MAX_SIZE_REACHED, member_id=req.member_id)
        if not req.member_id:
            return self._join_new(group, req, caller)
        return self._join_known(group, req, caller)

    def _join_new(self, group: Group, req: JoinRequest, caller: Caller):
        new_id = f"{req.instance_id or caller.client_id or 'member'}-{uuid.uuid4()}"
        if req.instance_id is not None:
            old_id = group.static.get(req.instance_id)
            if old_id is not None and old_id in group.members:
                return self._replace_static(group, group.members[old_id], new_id, req, caller)
        elif req.require_known_member_id:
            # The member must come back with this id: a client that never does costs a
            # timer, not a member the next rebalance would wait for.
            loop = asyncio.get_running_loop()
            group.pending[new_id] = loop.call_later(
                req.session_timeout_ms / 1000.0, self._pending_expired, group, new_id)
            return JoinResult(errors.MEMBER_ID_REQUIRED, member_id=new_id)
        return self._add_and_rebalance(group, new_id, req, caller)

    def _join_known(self, group: Group, req: JoinRequest, caller: Caller):
        timer = group.pending.pop(req.member_id, None)
        if timer is not None:  # the second half of the MEMBER_ID_REQUIRED round trip
            timer.cancel()
            return self._add_and_rebalance(group, req.member_id, req, caller)
        if req.instance_id is not None and group.static.get(req.instance_id) not in (
                None, req.member_id):
            return JoinResult(errors.FENCED_INSTANCE_ID, member_id=req.member_id)
        member = group.members.get(req.member_id)
        if member is None or group.state is GroupState.EMPTY:
            return JoinResult(errors.UNKNOWN_MEMBER_ID, member_id=req.member_id)
        changed = member.protocols != req.protocols
        if group.state is GroupState.PREPARING_REBALANCE:
            waiter = self._update(member, req, caller)
            self._maybe_complete_join(group)
            return waiter
        if group.state is GroupState.COMPLETING_REBALANCE and not changed:
            # it lost our answer: the same one again
            return self._join_result(group, member, members=member.member_id == group.leader_id)
        if group.state is GroupState.STABLE and not changed and (
                member.member_id != group.leader_id):
            return self._join_result(group, member, members=False)
        # the leader rejoining (it saw new metadata), or changed metadata: rebalance
        waiter = self._update(member, req, caller)
        self._prepare_rebalance(group, f"member {member.member_id} rejoined"
                                       + (" with new metadata" if changed else ""))
        return waiter

    def _new_waiter(self, member: Member) -> asyncio.Future:
        # A member that sends JoinGroup again while one is pending gets an answer to both.
        _answer(member.join_waiter, JoinResult(errors.REBALANCE_IN_PROGRESS,
                                               member_id=member.member_id))
        member.join_waiter = asyncio.get_running_loop().create_future()
        return member.join_waiter

    def _update(self, member: Member, req: JoinRequest, caller: Caller) -> asyncio.Future:
        member.protocols = req.protocols
        self._account(self.groups[req.group_id])
        member.session_timeout_ms = req.session_timeout_ms
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.client_id, member.client_host = caller.client_id, caller.host
        return self._new_waiter(member)

    def _add_and_rebalance(self, group: Group, member_id: str, req: JoinRequest,
                           caller: Caller) -> asyncio.Future:
        member = Member(member_id, req.instance_id, caller.client_id, caller.host,
                        req.session_timeout_ms, req.rebalance_timeout_ms, req.protocol_type,
                        req.protocols)
        if not group.members:
            group.protocol_type = req.protocol_type
        group.members[member_id] = member
        self._account(group)
        if req.instance_id is not None:
            group.static[req.instance_id] = member_id
        if group.leader_id is None:
            group.leader_id = member_id
        waiter = self._new_waiter(member)
        self._touch(group, member)
        log.info("broker.group_member_joined", group=group.group_id, member=member_id,
                 instance=req.instance_id, client_id=caller.client_id, host=caller.host,
                 members=len(group.members))
        if group.state is GroupState.PREPARING_REBALANCE:
            group.new_member_joined = True
            self._maybe_complete_join(group)
        else:
            self._prepare_rebalance(group, f"member {member_id} joined")
        return waiter

    def _replace_static(self, group: Group, old: Member, new_id: str, req: JoinRequest,
                        caller: Caller):
        """A static member came back (restarted): it takes over its old identity."""
        assert req.instance_id is not None  # only static members are replaced
        old_leader = group.leader_id
        _answer(old.join_waiter, JoinResult(errors.FENCED_INSTANCE_ID, member_id=old.member_id))
        _answer(old.sync_waiter, SyncResult(errors.FENCED_INSTANCE_ID))
        if old.session_timer is not None:
            old.session_timer.cancel()
        member = Member(new_id, req.instance_id, caller.client_id, caller.host,
                        req.session_timeout_ms, req.rebalance_timeout_ms, req.protocol_type,
                        req.protocols, assignment=old.assignment)
        group.members = {(new_id if k == old.member_id else k): (member if k == old.member_id
                                                                 else v)
                         for k, v in group.members.items()}
        group.static[req.instance_id] = new_id
        self._account(group)
        if group.leader_id == old.member_id:
            group.leader_id = new_id
        self._touch(group, member)
        log.info("broker.group_static_member_replaced", group=group.group_id,
                 instance=req.instance_id, old_member=old.member_id, member=new_id)
        if (group.state is GroupState.STABLE
                and self._select_protocol(group) == group.protocol_name):
            # The group's assignment still holds: no rebalance (KIP-345), the member takes
            # its stored assignment with SyncGroup. A leader on JoinGroup v9+ gets the
            # members and skip_assignment (KIP-814); an older one is told the old leader id,
            # so it acts as a follower, as Kafka answers it.
            if group.leader_id != new_id:
                return self._join_result(group, member, members=False)
            if req.can_skip_assignment:
                return self._join_result(group, member, members=True, skip=True)
            return self._join_result(group, member, members=False)._replace(
                leader=old_leader or "")
        waiter = self._new_waiter(member)
        if group.state is GroupState.PREPARING_REBALANCE:
            self._maybe_complete_join(group)
        else:
            self._prepare_rebalance(group, f"static member {req.instance_id} rejoined")
        return waiter

    def _join_result(self, group: Group, member: Member, members: bool,
                     skip: bool = False) -> JoinResult:
        listed = tuple(JoinedMember(m.member_id, m.instance_id, m.metadata_for(
            group.protocol_name)) for m in group.members.values()) if members else ()
        return JoinResult(errors.NONE, group.generation, group.protocol_type,
                          group.protocol_name, group.leader_id or "", member.member_id, listed,
                          skip)

    # -- rebalancing ----------------------------------------------------------------------

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.state is GroupState.COMPLETING_REBALANCE:
            for m in group.members.values():  # the assignment being handed out is void
                m.assignment = b""
                _answer(m.sync_waiter, SyncResult(errors.REBALANCE_IN_PROGRESS))
            self._account(group)
        loop = asyncio.get_running_loop()
        if group.join_timer is not None:
            group.join_timer.cancel()
        delay_ms = self.config.group_initial_rebalance_delay_ms
        if group.state is GroupState.EMPTY and delay_ms > 0:
            # Kafka's group.initial.rebalance.delay.ms: members of a new group usually
            # start together; waiting for them saves a rebalance per member.
            group.initial_delay = True
            group.new_member_joined = False
            remaining = max(group.rebalance_timeout_ms() - delay_ms, 0)
            group.join_timer = loop.call_later(delay_ms / 1000.0, self._initial_delay_over,
                                               group, remaining)
        else:
            group.join_timer = loop.call_later(group.rebalance_timeout_ms() / 1000.0,
                                               self._join_timed_out, group)
        group.state = GroupState.PREPARING_REBALANCE
        log.info("broker.group_rebalance_started", group=group.group_id, reason=reason,
                 generation=group.generation, members=len(group.members))
        self._maybe_complete_join(group)

    def _initial_delay_over(self, group: Group, remaining_ms: int) -> None:
        delay_ms = self.config.group_initial_rebalance_delay_ms
        if group.new_member_joined and remaining_ms > 0:
            group.new_member_joined = False
            step = min(delay_ms, remaining_ms)
            group.join_timer = asyncio.get_running_loop().call_later(
                step / 1000.0, self._initial_delay_over, group, remaining_ms - step)
            return
        group.initial_delay = False
        group.join_timer = None
        self._complete_join(group)

    def _join_timed_out(self, group: Group) -> None:
        group.join_timer = None
        self._complete_join(group)

    def _maybe_complete_join(self, group: Group) -> None:
        if (group.state is GroupState.PREPARING_REBALANCE and not group.initial_delay
                and group.all_joined()):
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        if group.state is not GroupState.PREPARING_REBALANCE:
            return
        if group.join_timer is not None:
            group.join_timer.cancel()
            group.join_timer = None
        group.initial_delay = False
        for m in list(group.members.values()):  # dynamic members that did not rejoin are out
            if not m.awaiting_join() and m.instance_id is None:
                self._remove(group, m, "did not rejoin within the rebalance timeout")
        joined = [m for m in group.members.values() if m.awaiting_join()]
        if group.members and not joined:
            # only static members that have not rejoined yet: wait for them a while more
            group.join_timer = asyncio.get_running_loop().call_later(
                max(group.rebalance_timeout_ms(), 1000) / 1000.0, self._join_timed_out, group)
            return
        group.generation += 1
        if not group.members:
            group.state = GroupState.EMPTY
            group.protocol_name = None
            group.leader_id = None
            self._save_generation(group)
            log.info("broker.group_empty", group=group.group_id, generation=group.generation)
            self._forget_if_unused(group)
            return
        group.protocol_name = self._select_protocol(group)
        if group.leader_id not in group.members or not group.members[
                group.leader_id].awaiting_join():
            group.leader_id = joined[0].member_id
        group.state = GroupState.COMPLETING_REBALANCE
        self._save_generation(group)
        log.info("broker.group_joined", group=group.group_id, generation=group.generation,
                 protocol=group.protocol_name, leader=group.leader_id,
                 members=len(group.members))
        for m in joined:
            _answer(m.join_waiter, self._join_result(
                group, m, members=m.member_id == group.leader_id))
            m.join_waiter = None
            self._touch(group, m)

    @staticmethod
    def _select_protocol(group: Group) -> str:
        """Each member votes for its most preferred protocol that every member supports."""
        candidates = group.candidate_protocols()
        votes: Counter[str] = Counter()
        order: list[str] = []
        for m in group.members.values():
            choice = next(p.name for p in m.protocols if p.name in candidates)
            votes[choice] += 1
            if choice not in order:
                order.append(choice)
        return max(order, key=lambda name: votes[name])  # ties: the first voted for

    def _save_generation(self, group: Group) -> None:
        """The generation, and a stable group's members (a rebalancing or empty group's
        record drops them: a restart then starts it over)."""
        if self.offsets.has_offsets(group.group_id) or group.members:
            self.offsets.record_generation(
                group.group_id, group.generation, group.protocol_type,
                self._stable_snapshot(group) if group.state is GroupState.STABLE else None)

    def _forget_if_unused(self, group: Group) -> None:
        """An empty group without committed offsets is gone, as Kafka's cleanup does."""
        if group.state is GroupState.EMPTY and not group.members:
            group.empty_since_ms = int(time.time() * 1000)
        if (group.state is GroupState.EMPTY and not group.members and not group.pending
                and not self.offsets.has_offsets(group.group_id)):
            self.groups.pop(group.group_id, None)
            self.offsets.delete_group(group.group_id)

    def _account(self, group: Group) -> None:
        """Bring the coordinator's metadata total up to date with ``group``."""
        now = group.metadata_bytes()
        self.metadata_total += now - group.counted
        group.counted = now

    def _metadata_refusal(self, group_id: str, group_bytes: int, growth: int) -> int | None:
        """UNKNOWN_SERVER_ERROR (Kafka's answer when a group's record is too large) if the
        group would hold more than its cap, or every group together more than theirs."""
        c = self.config
        for over, limit, setting in (
                (group_bytes > c.group_max_metadata_bytes, c.group_max_metadata_bytes,
                 "--group-max-metadata-bytes"),
                (growth > 0 and self.metadata_total + self.other_metadata() + growth
                 > c.groups_max_metadata_bytes,
                 c.groups_max_metadata_bytes, "--groups-max-metadata-bytes")):
            if over:
                log.warning("broker.group_metadata_too_large", group=group_id,
                            limit_bytes=limit, setting=setting)
                return errors.UNKNOWN_SERVER_ERROR
        return None

    def _room_for_group(self, group_id: str) -> bool:
        return room_for_group(group_id, len(self.groups) + self.other_groups(),
                              self.config.max_groups)

    def expire_groups(self, now_ms: int | None = None) -> int:
        """Kafka's offsets.retention.minutes: an empty group, and its committed offsets,
        go once it has been empty (and committed nothing) for that long."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        horizon = now - self.config.offsets_retention_ms
        gone = []
        for group in self.groups.values():
            if (group.state is GroupState.EMPTY and not group.members and not group.pending
                    and max(group.empty_since_ms,
                            self.offsets.newest_commit_ms(group.group_id)) < horizon):
                gone.append(group.group_id)
        for group_id in gone:
            self.metadata_total -= self.groups.pop(group_id).counted
            self.offsets.delete_group(group_id)
        if gone:
            log.info("broker.groups_expired", groups=len(gone),
                     offsets_retention_ms=self.config.offsets_retention_ms)
        return len(gone)

    # -- SyncGroup ------------------------------------------------------------------------

    def sync(self, group_id: str, generation: int, member_id: str, instance_id: str | None,
             protocol_type: str | None, protocol_name: str | None,
             assignments: dict[str, bytes]) -> SyncResult | asyncio.Future:
        self._arm_restored()
        group = self.groups.get(group_id)
        error = self._check_member(group, member_id, instance_id)
        if error:
            return SyncResult(error)
        assert group is not None
        if generation != group.generation:
            return SyncResult(errors.ILLEGAL_GENERATION)
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
                protocol_name is not None and protocol_name != group.protocol_name):
            return SyncResult(errors.INCONSISTENT_GROUP_PROTOCOL)
        member = group.members[member_id]
        if group.state is GroupState.PREPARING_REBALANCE:
            return SyncResult(errors.REBALANCE_IN_PROGRESS)
        self._touch(group, member)
        if group.state is GroupState.STABLE:
            return SyncResult(errors.NONE, group.protocol_type, group.protocol_name,
                              member.assignment)
        if member_id == group.leader_id:
            assigned = sum(len(assignments.get(m, b"")) for m in group.members)
            metadata = sum(len(p.metadata) for m in group.members.values()
                           for p in m.protocols)
            grows = assigned - sum(len(m.assignment) for m in group.members.values())
            refused = self._metadata_refusal(group_id, assigned + metadata, grows)
            if refused is not None:
                return SyncResult(refused)
        _answer(member.sync_waiter, SyncResult(errors.REBALANCE_IN_PROGRESS))
        waiter = member.sync_waiter = asyncio.get_running_loop().create_future()
        if member_id == group.leader_id:
            for m in group.members.values():
                m.assignment = assignments.get(m.member_id, b"")
            self._account(group)
            group.state = GroupState.STABLE
            group.rebalances += 1
            self._save_generation(group)
            log.info("broker.group_stable", group=group.group_id, generation=group.generation,
                     members=len(group.members))
            for m in group.members.values():
                _answer(m.sync_waiter, SyncResult(errors.NONE, group.protocol_type,
                                                  group.protocol_name, m.assignment))
                m.sync_waiter = None
        return waiter

    # -- Heartbeat, LeaveGroup, commits ------------------------------------------------------

    def _check_member(self, group: Group | None, member_id: str,
                      instance_id: str | None) -> int:
        if group is None:
            return errors.UNKNOWN_MEMBER_ID
        if instance_id is not None and group.static.get(instance_id) not in (None, member_id):
            return errors.FENCED_INSTANCE_ID
        if member_id not in group.members or group.state is GroupState.EMPTY:
            return errors.UNKNOWN_MEMBER_ID
        return errors.NONE

    def heartbeat(self, group_id: str, generation: int, member_id: str,
                  instance_id: str | None) -> int:
        self._arm_restored()
        group = self.groups.get(group_id)
        error = self._check_member(group, member_id, instance_id)
        if error:
            return error
        assert group is not None
        self._touch(group, group.members[member_id])
        if group.state is GroupState.PREPARING_REBALANCE:
            return errors.REBALANCE_IN_PROGRESS
        if generation != group.generation:
            return errors.ILLEGAL_GENERATION
        return errors.NONE

    def leave(self, group_id: str, identities: list[tuple[str, str | None]]) -> list[int]:
        """Error per leaving (member id, instance id); the group rebalances without them."""
        self._arm_restored()
        group = self.groups.get(group_id)
        if group is None:
            return [errors.UNKNOWN_MEMBER_ID] * len(identities)
        out = []
        removed = False
        for member_id, instance_id in identities:
            if instance_id is not None:
                actual = group.static.get(instance_id)
                if actual is None or actual not in group.members:
                    out.append(errors.UNKNOWN_MEMBER_ID)
                    continue
                if member_id and member_id != actual:
                    out.append(errors.FENCED_INSTANCE_ID)
                    continue
                member_id = actual
            timer = group.pending.pop(member_id, None)
            if timer is not None:
                timer.cancel()
                out.append(errors.NONE)
                continue
            member = group.members.get(member_id)
            if member is None:
                out.append(errors.UNKNOWN_MEMBER_ID)
                continue
            self._remove(group, member, "left the group")
            removed = True
            out.append(errors.NONE)
        if removed:
            self._after_removal(group, "member left")
        elif group.state is GroupState.PREPARING_REBALANCE:
            self._maybe_complete_join(group)
        return out

    def check_commit(self, group_id: str, generation: int, member_id: str,
                     instance_id: str | None) -> int:
        """May this OffsetCommit write? (Kafka's rules; -1 generation = not a member.)"""
        self._arm_restored()
        group = self.groups.get(group_id)
        if group is None:
            if generation < 0:  # offsets only: the group exists from now on, empty
                if not self._room_for_group(group_id):
                    return errors.GROUP_MAX_SIZE_REACHED
                self.groups[group_id] = Group(group_id)
                return errors.NONE
            return errors.ILLEGAL_GENERATION
        if instance_id is not None and group.static.get(instance_id) not in (None, member_id):
            return errors.FENCED_INSTANCE_ID
        if generation < 0 and group.state is GroupState.EMPTY:
            return errors.NONE
        if group.state is GroupState.COMPLETING_REBALANCE:
            return errors.REBALANCE_IN_PROGRESS
        member = group.members.get(member_id)
        if member is None:
            return errors.UNKNOWN_MEMBER_ID
        if generation != group.generation:
            return errors.ILLEGAL_GENERATION
        self._touch(group, member)
        return errors.NONE

    # -- member liveness --------------------------------------------------------------------

    def _touch(self, group: Group, member: Member) -> None:
        member.session_timer = rearm(member.session_timer, member.session_timeout_ms / 1000.0,
                                     self._session_expired, group, member)

    def _session_expired(self, group: Group, member: Member) -> None:
        if group.members.get(member.member_id) is not member:
            return
        if member.awaiting_join() or member.awaiting_sync():
            self._touch(group, member)  # parked in a rebalance: alive by definition
            return
        log.warning("broker.group_member_expired", group=group.group_id,
                    member=member.member_id, instance=member.instance_id,
                    session_timeout_ms=member.session_timeout_ms)
        self._remove(group, member, "session timed out")
        self._after_removal(group, f"member {member.member_id} session timed out")

    def _pending_expired(self, group: Group, member_id: str) -> None:
        if group.pending.pop(member_id, None) is not None:
            self._maybe_complete_join(group)
            self._forget_if_unused(group)

    def _remove(self, group: Group, member: Member, reason: str) -> None:
        if member.session_timer is not None:
            member.session_timer.cancel()
        _answer(member.join_waiter, JoinResult(errors.UNKNOWN_MEMBER_ID,
                                               member_id=member.member_id))
        _answer(member.sync_waiter, SyncResult(errors.UNKNOWN_MEMBER_ID))
        group.members.pop(member.member_id, None)
        self._account(group)
        if member.instance_id is not None and group.static.get(
                member.instance_id) == member.member_id:
            del group.static[member.instance_id]
        if group.leader_id == member.member_id:
            group.leader_id = next(iter(group.members), None)
        log.info("broker.group_member_removed", group=group.group_id,
                 member=member.member_id, reason=reason, members=len(group.members))

    def _after_removal(self, group: Group, reason: str) -> None:
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, reason)
        elif group.state is GroupState.PREPARING_REBALANCE:
            self._maybe_complete_join(group)

    def partitions_added(self, topic: str) -> None:
        """A subscribed topic grew: its groups rebalance so the new partitions get owners."""
        for group in list(self.groups.values()):
            if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE) and (
                    topic in group.subscribed_topics()):
                self._prepare_rebalance(group, f"partitions added to {topic}")

    # -- administration -------------------------------------------------------------------

    def describe(self, group_id: str) -> GroupSummary:
        group = self.groups.get(group_id)
        if group is None:
            return GroupSummary(group_id, GroupState.DEAD, "", "", -1, ())
        stable = group.state is GroupState.STABLE
        members = tuple(MemberSummary(
            m.member_id, m.instance_id, m.client_id, m.client_host,
            m.metadata_for(group.protocol_name) if stable else b"",
            m.assignment if stable else b"") for m in group.members.values())
        return GroupSummary(group_id, group.state, group.protocol_type or "",
                            (group.protocol_name or "") if stable else "", group.generation,
                            members)

    def listed(self) -> list[GroupSummary]:
        return [self.describe(g) for g in sorted(self.groups)]

    def delete(self, group_id: str) -> int:
        if not group_id:
            return errors.INVALID_GROUP_ID
        group = self.groups.get(group_id)
        if group is None:
            return errors.GROUP_ID_NOT_FOUND
        if group.state is not GroupState.EMPTY or group.members:
            return errors.NON_EMPTY_GROUP
        for timer in group.pending.values():
            timer.cancel()
        del self.groups[group_id]
        self.offsets.delete_group(group_id)
        log.info("broker.group_deleted", group=group_id)
        return errors.NONE

    def has_group(self, group_id: str) -> bool:
        return group_id in self.groups

    def give_up_empty(self, group_id: str) -> bool:
        """A KIP-848 member joins ``group_id``: true if it is not a classic group (any
        more). A classic group without members becomes a consumer group (its committed
        offsets stay, as in Kafka's upgrade of an empty group); one with members stays."""
        group = self.groups.get(group_id)
        if group is None:
            return True
        if group.members or group.pending:
            return False
        self.metadata_total -= self.groups.pop(group_id).counted
        return True

    def subscribes_to(self, group_id: str, topic: str) -> bool:
        group = self.groups.get(group_id)
        return (group is not None and group.state is not GroupState.EMPTY
                and topic in group.subscribed_topics())
