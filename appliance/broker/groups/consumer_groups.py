"""KIP-848 consumer groups: the broker assigns, members reconcile by heartbeat.

Why beside the classic coordinator: Kafka 4 and librdkafka >= 2.12 offer
``group.protocol=consumer``, where a member only heartbeats (ConsumerGroupHeartbeat) with
its subscription and what it owns, and the broker computes the assignment (``assignors``)
and hands it out incrementally. No stop-the-world rebalance: a member that must give a
partition up keeps the rest, and nobody gets that partition before its owner said it let
go, so a partition is never owned by two members at once.

Epochs, as Kafka's: the group epoch moves whenever the membership, a subscription, or a
subscribed topic's partitions change; the target assignment is recomputed for it (its
epoch is the assignment epoch); each member's epoch reaches the assignment epoch once it
owns nothing another member should have. A member reconciles in states:

    Stable --new target--> UnrevokedPartitions (keeps the rest, must ack the revocation)
    UnrevokedPartitions --owned without them--> UnreleasedPartitions | Stable
    UnreleasedPartitions --others released what it should get--> Stable

A heartbeat with an epoch the member is past is fenced (FENCED_MEMBER_EPOCH) unless it is
the previous epoch and what it owns is still its own (a lost response). Epoch -1 leaves;
-2 is a static member's temporary leave (its assignment kept for its session, taken back
by a rejoin with the same instance id). Sessions last ``group_consumer_session_timeout_ms``
(Kafka's group.consumer.session.timeout.ms); a revocation not acknowledged within the
member's rebalance timeout fences it.

A group id is either classic or consumer: the wire handlers (``apis``) route by
``has_group``. The group (epochs, members, assignments, target) is saved with the
committed offsets (``offsets``) on every change, so a broker restart keeps it: members
go on heartbeating with their epochs. Restored members' sessions start again when the
coordinator is next used after the restart. An empty group expires with its committed
offsets after ``offsets_retention_ms``, as classic groups do.

The members' subscriptions are what a client decides the size of (the broker computes
the assignments, bounded by the partitions): they count against the same caps as the
classic groups' metadata, ``group_max_metadata_bytes`` per group and
``groups_max_metadata_bytes`` for every group of both kinds together, each topic name at
what it holds in memory (``subscription_size``).
"""

from __future__ import annotations

import asyncio
import enum
import re
import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from appliance.broker.caller import Caller
from appliance.broker.groups.assignors import ASSIGNORS, DEFAULT_ASSIGNOR, AssignorInput
from appliance.broker.groups.group_cap import room_for_group
from appliance.broker.groups.offsets import OffsetStore
from appliance.broker.groups.timers import rearm
from appliance.broker.settings import BrokerConfig
from appliance.broker.wire import errors
from appliance.logs import get_logger

log = get_logger("appliance.broker")

TopicPartitions = dict[str, frozenset[int]]  # topic name -> partitions
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2
PROTOCOL_TYPE = "consumer"  # what ListGroups shows as the protocol type and group type
NAME_OVERHEAD = 64  # a topic name held as a str (CPython: 49 bytes and its characters),
# with its slot in the member's tuple and in the group's saved snapshot


def subscription_size(names: tuple[str, ...], regex: str | None) -> int:
    """What a member's subscription holds in memory, counted against the metadata caps."""
    return sum(len(n) + NAME_OVERHEAD for n in names) + (len(regex) if regex else 0)


class ConsumerGroupState(enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"  # the target is behind the group epoch (never seen here)
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


class MemberState(enum.Enum):
    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"
    UNRELEASED_PARTITIONS = "unreleased_partitions"


class HeartbeatRequest(NamedTuple):
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None
    rack_id: str | None
    rebalance_timeout_ms: int
    subscribed_topic_names: tuple[str, ...] | None  # None: unchanged
    subscribed_topic_regex: str | None  # None: unchanged
    server_assignor: str | None
    owned: TopicPartitions | None  # None: unchanged since the last heartbeat
    member_id_from_client: bool  # v1+: the member made its id; v0: the broker does


class HeartbeatResult(NamedTuple):
    error: int
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: TopicPartitions | None = None  # None: unchanged


@dataclass(eq=False)
class ConsumerMember:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    subscribed_names: tuple[str, ...] = ()
    subscribed_regex: str | None = None
    server_assignor: str | None = None
    epoch: int = 0
    previous_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: TopicPartitions = field(default_factory=dict)
    revoking: TopicPartitions = field(default_factory=dict)
    sent: tuple | None = None  # (epoch, assigned) last sent to the member
    session_timer: asyncio.TimerHandle | None = None
    revoke_timer: asyncio.TimerHandle | None = None

    def owns(self) -> set[tuple[str, int]]:
        return _pairs(self.assigned) | _pairs(self.revoking)

    def subscription_bytes(self) -> int:
        return subscription_size(self.subscribed_names, self.subscribed_regex)


@dataclass(eq=False)
class ConsumerGroup:
    group_id: str
    epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    target: dict[str, TopicPartitions] = field(default_factory=dict)
    sizes: dict[str, int] = field(default_factory=dict)  # subscribed topic -> partitions
    assignor: str = DEFAULT_ASSIGNOR
    empty_since_ms: int = field(default_factory=lambda: int(time.time() * 1000))
    rebalances: int = 0  # epochs moved since the broker started, for metrics
    subscription_bytes: int = 0  # its members' subscriptions (subscription_size)
    saved: dict | None = None  # the snapshot last written (a heartbeat that changed
    # nothing writes nothing)

    def state(self) -> ConsumerGroupState:
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.assignment_epoch < self.epoch:
            return ConsumerGroupState.ASSIGNING
        # a copy first: the metrics endpoint reads this off the event loop
        if any(m.epoch not in (self.assignment_epoch, STATIC_LEAVE_EPOCH)
               or m.state is not MemberState.STABLE for m in list(self.members.values())):
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def static_member(self, instance_id: str) -> ConsumerMember | None:
        return next((m for m in self.members.values() if m.instance_id == instance_id), None)


def _pairs(tp: Mapping[str, frozenset[int]]) -> set[tuple[str, int]]:
    return {(t, p) for t, parts in tp.items() for p in parts}


def _grouped(pairs: set[tuple[str, int]]) -> TopicPartitions:
    out: dict[str, set[int]] = {}
    for t, p in pairs:
        out.setdefault(t, set()).add(p)
    return {t: frozenset(p) for t, p in out.items()}


def _regex(pattern: str) -> re.Pattern | None:
    try:
        return re.compile(pattern)
    except re.error:
        return None


class ConsumerGroupCoordinator:
    def __init__(self, config: BrokerConfig, offsets: OffsetStore,
                 topic_sizes: Callable[[], Mapping[str, int]],
                 other_groups: Callable[[], int] = lambda: 0,
                 other_metadata: Callable[[], int] = lambda: 0) -> None:
        self.config = config
        self.offsets = offsets
        self.other_groups = other_groups  # classic groups: --max-groups counts both kinds
        # ... and their metadata: --groups-max-metadata-bytes counts both kinds too
        self.other_metadata = other_metadata
        self.subscription_total = 0  # every group's subscription_bytes
        self.topic_sizes = topic_sizes  # every topic's partition count, now
        self.groups: dict[str, ConsumerGroup] = {}
        # restored: no session (or revocation) timer yet
        self._unarmed: list[tuple[ConsumerGroup, ConsumerMember]] = []
        self._expiry_timer: asyncio.TimerHandle | None = None
        for group_id, snapshot in offsets.consumer_groups().items():
            group = self._restore(group_id, snapshot)
            self.groups[group_id] = group
            self.subscription_total += group.subscription_bytes
            self._unarmed += [(group, m) for m in group.members.values()]

    # -- ConsumerGroupHeartbeat -----------------------------------------------------------

    def heartbeat(self, req: HeartbeatRequest, caller: Caller) -> HeartbeatResult:
        self._arm_restored()
        invalid = self._invalid(req)
        if invalid:
            return HeartbeatResult(errors.INVALID_REQUEST, invalid)
        if req.server_assignor is not None and req.server_assignor not in ASSIGNORS:
            return HeartbeatResult(
                errors.UNSUPPORTED_ASSIGNOR,
                f"assignor {req.server_assignor!r} is not one of {sorted(ASSIGNORS)}")
        if req.subscribed_topic_regex is not None and _regex(
                req.subscribed_topic_regex) is None:
            return HeartbeatResult(errors.INVALID_REGULAR_EXPRESSION,
                                   f"invalid regular expression {req.subscribed_topic_regex!r}")
        group = self.groups.get(req.group_id)
        if req.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return self._leave(group, req)
        too_large = self._subscription_refusal(group, req)
        if too_large is not None:
            return too_large
        if req.member_epoch == 0:
            joined = self._join(group, req, caller)
            if isinstance(joined, HeartbeatResult):
                return joined
            group, member, joined_now = joined
        else:
            joined_now = False
            member = group.members.get(req.member_id) if group else None
            if group is None or member is None:
                return HeartbeatResult(
                    errors.UNKNOWN_MEMBER_ID,
                    f"member {req.member_id} is not in group {req.group_id}")
            fenced = self._fenced(member, req)
            if fenced:
                return HeartbeatResult(errors.FENCED_MEMBER_EPOCH, fenced)
        changed = self._update_subscription(group, member, req)
        member.client_id, member.client_host = caller.client_id, caller.host
        self._touch(group, member)
        if joined_now:
            self._bump(group, f"member {member.member_id} joined")
        elif changed or self._sizes_changed(group):
            self._bump(group, f"member {member.member_id} subscription changed"
                       if changed else "subscribed topics changed")
        self._reconcile(group, member, req.owned)
        self._save(group)
        now = (member.epoch, member.assigned)
        owned_differs = req.owned is not None and _pairs(req.owned) != _pairs(member.assigned)
        send = req.member_epoch == 0 or now != member.sent or owned_differs
        member.sent = now
        return HeartbeatResult(errors.NONE, None, member.member_id, member.epoch,
                               self.config.group_consumer_heartbeat_interval_ms,
                               dict(member.assigned) if send else None)

    @staticmethod
    def _invalid(req: HeartbeatRequest) -> str | None:
        if not req.group_id:
            return "GroupId can't be empty."
        if req.member_id_from_client and not req.member_id:
            return "MemberId can't be empty."
        if req.member_epoch < STATIC_LEAVE_EPOCH:
            return f"MemberEpoch {req.member_epoch} is not valid."
        if req.member_epoch == STATIC_LEAVE_EPOCH and req.instance_id is None:
            return "InstanceId can't be null when leaving with epoch -2."
        if req.member_epoch == 0:
            if req.rebalance_timeout_ms == -1:
                return "RebalanceTimeoutMs must be provided in first request."
            if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
                return ("SubscribedTopicNames or SubscribedTopicRegex must be set in first "
                        "request.")
            if req.owned:
                return "TopicPartitions must be empty when (re-)joining."
        return None

    def _join(self, group: ConsumerGroup | None, req: HeartbeatRequest, caller: Caller):
        c = self.config
        if group is None:
            if not self._room_for_group(req.group_id):
                return HeartbeatResult(errors.GROUP_MAX_SIZE_REACHED,
                                       f"the broker keeps at most {c.max_groups} groups")
            group = self.groups[req.group_id] = ConsumerGroup(req.group_id)
        member_id = req.member_id or str(uuid.uuid4())
        old = group.members.get(member_id)
        if old is not None:  # a rejoin (after being fenced): a new member from scratch
            self._remove(group, old, "rejoined with epoch 0")
        inherited = None
        if req.instance_id is not None:
            inherited = group.static_member(req.instance_id)
            if inherited is not None and inherited.epoch != STATIC_LEAVE_EPOCH:
                return HeartbeatResult(
                    errors.UNRELEASED_INSTANCE_ID,
                    f"instance {req.instance_id} is still member {inherited.member_id}")
        if inherited is None and len(group.members) >= c.group_max_size:
            return HeartbeatResult(errors.GROUP_MAX_SIZE_REACHED,
                                   f"group {req.group_id} has {c.group_max_size} members")
        member = ConsumerMember(member_id, req.instance_id, req.rack_id, caller.client_id,
                                caller.host, req.rebalance_timeout_ms)
        if inherited is not None:  # a static member back: its assignment, no rebalance
            self._cancel_timers(inherited)
            del group.members[inherited.member_id]
            member.subscribed_names = inherited.subscribed_names
            member.subscribed_regex = inherited.subscribed_regex
            member.server_assignor = inherited.server_assignor
            member.epoch, member.previous_epoch = inherited.previous_epoch, -1
            member.assigned, member.revoking = inherited.assigned, inherited.revoking
            member.state = inherited.state
            group.members[member_id] = member
            group.target[member_id] = group.target.pop(inherited.member_id, {})
            log.info("broker.group_static_member_replaced", group=group.group_id,
                     member=member_id, old_member=inherited.member_id,
                     instance=req.instance_id)
            return group, member, False
        group.members[member_id] = member
        log.info("broker.group_member_joined", group=group.group_id, member=member_id,
                 instance=req.instance_id, client_id=caller.client_id, host=caller.host,
                 members=len(group.members), protocol=PROTOCOL_TYPE)
        return group, member, True

    @staticmethod
    def _fenced(member: ConsumerMember, req: HeartbeatRequest) -> str | None:
        if req.member_epoch == member.epoch:
            return None
        if (req.member_epoch < member.epoch and req.member_epoch == member.previous_epoch
                and req.owned is not None
                and _pairs(req.owned) <= _pairs(member.assigned)):
            return None  # it missed our last answer; what it owns is still its own
        return (f"member {member.member_id} sent epoch {req.member_epoch}, "
                f"its epoch is {member.epoch}")

    def _leave(self, group: ConsumerGroup | None, req: HeartbeatRequest) -> HeartbeatResult:
        member = None
        if group is not None:
            member = group.members.get(req.member_id)
            if member is None and req.instance_id is not None:
                member = group.static_member(req.instance_id)
        if group is None or member is None:
            return HeartbeatResult(errors.UNKNOWN_MEMBER_ID,
                                   f"member {req.member_id} is not in group {req.group_id}")
        if req.member_epoch == STATIC_LEAVE_EPOCH:
            # kept with its assignment for its session: the same instance takes it back
            member.previous_epoch, member.epoch = member.epoch, STATIC_LEAVE_EPOCH
            self._touch(group, member)
            log.info("broker.group_static_member_left", group=group.group_id,
                     member=member.member_id, instance=member.instance_id)
        else:
            self._remove(group, member, "left the group")
            self._bump(group, f"member {member.member_id} left")
        self._save(group)
        self._forget_if_unused(group)
        return HeartbeatResult(errors.NONE, None, member.member_id, req.member_epoch,
                               0, None)

    def _subscription_refusal(self, group: ConsumerGroup | None,
                              req: HeartbeatRequest) -> HeartbeatResult | None:
        """The metadata caps (as the classic groups'): UNKNOWN_SERVER_ERROR, naming the
        setting, if the new subscription would make the group, or every group of both
        kinds together, hold more than its cap."""
        if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
            return None
        member = group.members.get(req.member_id) if group is not None else None
        names = (tuple(set(req.subscribed_topic_names))
                 if req.subscribed_topic_names is not None
                 else member.subscribed_names if member is not None else ())
        regex = (req.subscribed_topic_regex if req.subscribed_topic_regex is not None
                 else member.subscribed_regex if member is not None else None)
        old = member.subscription_bytes() if member is not None else 0
        growth = subscription_size(names, regex) - old
        c = self.config
        group_bytes = (group.subscription_bytes if group is not None else 0) + growth
        for over, limit, setting in (
                (group_bytes > c.group_max_metadata_bytes, c.group_max_metadata_bytes,
                 "--group-max-metadata-bytes"),
                (growth > 0 and self.subscription_total + self.other_metadata() + growth
                 > c.groups_max_metadata_bytes, c.groups_max_metadata_bytes,
                 "--groups-max-metadata-bytes")):
            if over:
                log.warning("broker.group_metadata_too_large", group=req.group_id,
                            limit_bytes=limit, setting=setting, protocol=PROTOCOL_TYPE)
                return HeartbeatResult(errors.UNKNOWN_SERVER_ERROR,
                                       f"the subscription would take group {req.group_id} "
                                       f"or all groups past {setting} ({limit} bytes)")
        return None

    def _update_subscription(self, group: ConsumerGroup, member: ConsumerMember,
                             req: HeartbeatRequest) -> bool:
        before = (member.subscribed_names, member.subscribed_regex, member.server_assignor)
        held = member.subscription_bytes()
        if req.subscribed_topic_names is not None:
            member.subscribed_names = tuple(sorted(set(req.subscribed_topic_names)))
        if req.subscribed_topic_regex is not None:
            member.subscribed_regex = req.subscribed_topic_regex or None
        self._account(group, member.subscription_bytes() - held)
        if req.server_assignor is not None:
            member.server_assignor = req.server_assignor
        if req.rebalance_timeout_ms > 0:
            member.rebalance_timeout_ms = req.rebalance_timeout_ms
        return before != (member.subscribed_names, member.subscribed_regex,
                          member.server_assignor)

    # -- the target assignment and reconciliation -----------------------------------------

    def _member_topics(self, member: ConsumerMember, sizes: Mapping[str, int]) -> frozenset:
        topics = {t for t in member.subscribed_names if t in sizes}
        if member.subscribed_regex:
            pattern = _regex(member.subscribed_regex)
            if pattern is not None:
                topics |= {t for t in sizes if pattern.fullmatch(t)}
        return frozenset(topics)

    def _subscribed_sizes(self, group: ConsumerGroup) -> dict[str, int]:
        sizes = self.topic_sizes()
        wanted: set[str] = set()
        for m in group.members.values():
            wanted |= self._member_topics(m, sizes)
        return {t: sizes[t] for t in wanted}

    def _sizes_changed(self, group: ConsumerGroup) -> bool:
        return self._subscribed_sizes(group) != group.sizes

    def _bump(self, group: ConsumerGroup, reason: str) -> None:
        """A new group epoch, and at once its target assignment."""
        group.epoch += 1
        group.rebalances += 1
        sizes = self.topic_sizes()
        subscriptions = {m.member_id: self._member_topics(m, sizes)
                         for m in group.members.values()}
        votes = Counter(m.server_assignor for m in group.members.values()
                        if m.server_assignor)
        group.assignor = votes.most_common(1)[0][0] if votes else DEFAULT_ASSIGNOR
        group.sizes = self._subscribed_sizes(group)
        group.target = ASSIGNORS[group.assignor](
            AssignorInput(subscriptions, group.sizes, group.target))
        group.assignment_epoch = group.epoch
        log.info("broker.group_epoch_bumped", group=group.group_id, epoch=group.epoch,
                 reason=reason, assignor=group.assignor, members=len(group.members),
                 protocol=PROTOCOL_TYPE)

    def _owner_elsewhere(self, group: ConsumerGroup, member: ConsumerMember) -> set:
        taken: set[tuple[str, int]] = set()
        for m in group.members.values():
            if m is not member:
                taken |= m.owns()
        return taken

    def _reconcile(self, group: ConsumerGroup, member: ConsumerMember,
                   owned: TopicPartitions | None) -> None:
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            if owned is None or _pairs(owned) & _pairs(member.revoking):
                return  # still owns what it must give up
            member.revoking = {}
            if member.revoke_timer is not None:
                member.revoke_timer.cancel()
                member.revoke_timer = None
            member.state = MemberState.STABLE
        if (member.epoch == group.assignment_epoch
                and member.state is MemberState.STABLE):
            return
        target = _pairs(group.target.get(member.member_id, {}))
        current = _pairs(member.assigned)
        revoke = current - target
        if revoke:
            member.assigned = _grouped(current & target)
            member.revoking = _grouped(revoke)
            member.state = MemberState.UNREVOKED_PARTITIONS
            self._await_revocation(group, member)
            return
        missing = target - current
        free = missing - self._owner_elsewhere(group, member)
        member.assigned = _grouped(current | free)
        if member.epoch != group.assignment_epoch:
            member.previous_epoch, member.epoch = member.epoch, group.assignment_epoch
        member.state = (MemberState.UNRELEASED_PARTITIONS if missing - free
                        else MemberState.STABLE)

    # -- liveness -------------------------------------------------------------------------

    def _arm_restored(self) -> None:
        """Timers need the event loop: restored members' sessions and the expiry sweep
        start with the first call that runs on it."""
        if self._expiry_timer is None:
            self._schedule_expiry()
        unarmed, self._unarmed = self._unarmed, []
        for group, member in unarmed:
            if group.members.get(member.member_id) is member:
                self._touch(group, member)
                if member.revoking:
                    self._await_revocation(group, member)

    def _await_revocation(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        member.revoke_timer = rearm(member.revoke_timer, member.rebalance_timeout_ms / 1000.0,
                                    self._revoke_expired, group, member)

    def _touch(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        member.session_timer = rearm(member.session_timer,
                                     self.config.group_consumer_session_timeout_ms / 1000.0,
                                     self._session_expired, group, member)

    def _session_expired(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        if group.members.get(member.member_id) is not member:
            return
        log.warning("broker.group_member_expired", group=group.group_id,
                    member=member.member_id, instance=member.instance_id,
                    session_timeout_ms=self.config.group_consumer_session_timeout_ms)
        self._remove(group, member, "session timed out")
        self._bump(group, f"member {member.member_id} session timed out")
        self._save(group)
        self._forget_if_unused(group)

    def _revoke_expired(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        if group.members.get(member.member_id) is not member or not member.revoking:
            return
        log.warning("broker.group_member_revocation_timed_out", group=group.group_id,
                    member=member.member_id, rebalance_timeout_ms=member.rebalance_timeout_ms)
        self._remove(group, member, "did not revoke within its rebalance timeout")
        self._bump(group, f"member {member.member_id} fenced")
        self._save(group)

    def _cancel_timers(self, member: ConsumerMember) -> None:
        for timer in (member.session_timer, member.revoke_timer):
            if timer is not None:
                timer.cancel()

    def _account(self, group: ConsumerGroup, growth: int) -> None:
        group.subscription_bytes += growth
        self.subscription_total += growth

    def _remove(self, group: ConsumerGroup, member: ConsumerMember, reason: str) -> None:
        self._cancel_timers(member)
        if group.members.pop(member.member_id, None) is not None:
            self._account(group, -member.subscription_bytes())
        group.target.pop(member.member_id, None)
        if not group.members:
            group.empty_since_ms = int(time.time() * 1000)
        log.info("broker.group_member_removed", group=group.group_id,
                 member=member.member_id, reason=reason, members=len(group.members))

    def _schedule_expiry(self) -> None:
        c = self.config
        every = min(c.offsets_retention_check_ms, c.offsets_retention_ms / 2) / 1000.0
        self._expiry_timer = asyncio.get_running_loop().call_later(every, self._expiry_tick)

    def _expiry_tick(self) -> None:
        try:
            self.expire_groups()
        finally:
            self._schedule_expiry()

    def expire_groups(self, now_ms: int | None = None) -> int:
        """Kafka's offsets.retention.minutes: a group without members goes, with its
        committed offsets, once it has been empty and committed nothing for that long."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        horizon = now - self.config.offsets_retention_ms
        gone = [g.group_id for g in self.groups.values() if not g.members and max(
            g.empty_since_ms, self.offsets.newest_commit_ms(g.group_id)) < horizon]
        for group_id in gone:
            del self.groups[group_id]
            self.offsets.delete_group(group_id)
        if gone:
            log.info("broker.groups_expired", groups=len(gone), protocol=PROTOCOL_TYPE,
                     offsets_retention_ms=self.config.offsets_retention_ms)
        return len(gone)

    def _forget_if_unused(self, group: ConsumerGroup) -> None:
        """An empty group without committed offsets is gone, as Kafka's cleanup does."""
        if not group.members and not self.offsets.has_offsets(group.group_id):
            self.groups.pop(group.group_id, None)
            self.offsets.delete_group(group.group_id)

    def _room_for_group(self, group_id: str) -> bool:
        return room_for_group(group_id, len(self.groups) + self.other_groups(),
                              self.config.max_groups)

    # -- offsets, administration ----------------------------------------------------------

    def has_group(self, group_id: str) -> bool:
        return group_id in self.groups

    def check_commit(self, group_id: str, member_id: str, epoch: int) -> int:
        """OffsetCommit into a consumer group: by a member at its epoch, or by anyone
        (epoch -1) while it has no members."""
        group = self.groups[group_id]
        if epoch < 0 and not group.members:
            return errors.NONE
        member = group.members.get(member_id)
        if member is None:
            return errors.UNKNOWN_MEMBER_ID
        if epoch != member.epoch:
            return errors.STALE_MEMBER_EPOCH
        return errors.NONE

    def check_fetch(self, group_id: str, member_id: str | None, epoch: int) -> int:
        """OffsetFetch v9 with a member epoch (-1: no member check, an admin's fetch)."""
        group = self.groups.get(group_id)
        if group is None or member_id is None or epoch < 0:
            return errors.NONE
        member = group.members.get(member_id)
        if member is None:
            return errors.UNKNOWN_MEMBER_ID
        return errors.STALE_MEMBER_EPOCH if epoch != member.epoch else errors.NONE

    def delete(self, group_id: str) -> int:
        group = self.groups[group_id]
        if group.members:
            return errors.NON_EMPTY_GROUP
        del self.groups[group_id]
        self.offsets.delete_group(group_id)
        log.info("broker.group_deleted", group=group_id, protocol=PROTOCOL_TYPE)
        return errors.NONE

    def subscribes_to(self, group_id: str, topic: str) -> bool:
        group = self.groups.get(group_id)
        return group is not None and topic in group.sizes

    def listed(self) -> list[ConsumerGroup]:
        self._arm_restored()
        return [self.groups[g] for g in sorted(self.groups)]

    def get(self, group_id: str) -> ConsumerGroup | None:
        self._arm_restored()
        return self.groups.get(group_id)

    # -- durability -----------------------------------------------------------------------

    def _save(self, group: ConsumerGroup) -> None:
        if group.group_id not in self.groups:
            return
        snapshot = {
            "epoch": group.epoch, "assignment_epoch": group.assignment_epoch,
            "assignor": group.assignor, "sizes": group.sizes,
            "target": {m: _listed(tp) for m, tp in group.target.items()},
            "members": [{
                "id": m.member_id, "instance": m.instance_id, "rack": m.rack_id,
                "client_id": m.client_id, "host": m.client_host,
                "rebalance_timeout_ms": m.rebalance_timeout_ms,
                "names": list(m.subscribed_names), "regex": m.subscribed_regex,
                "assignor": m.server_assignor, "epoch": m.epoch,
                "previous_epoch": m.previous_epoch, "state": m.state.value,
                "assigned": _listed(m.assigned), "revoking": _listed(m.revoking),
            } for m in group.members.values()]}
        if snapshot != group.saved:
            self.offsets.record_consumer_group(group.group_id, snapshot)
            group.saved = snapshot

    @staticmethod
    def _restore(group_id: str, s: dict) -> ConsumerGroup:
        group = ConsumerGroup(group_id, s["epoch"], s["assignment_epoch"],
                              assignor=s["assignor"], sizes=dict(s["sizes"]),
                              target={m: _unlisted(tp) for m, tp in s["target"].items()},
                              saved=s)
        for m in s["members"]:
            group.members[m["id"]] = ConsumerMember(
                m["id"], m["instance"], m["rack"], m["client_id"], m["host"],
                m["rebalance_timeout_ms"], tuple(m["names"]), m["regex"], m["assignor"],
                m["epoch"], m["previous_epoch"], MemberState(m["state"]),
                _unlisted(m["assigned"]), _unlisted(m["revoking"]))
        group.subscription_bytes = sum(m.subscription_bytes() for m in group.members.values())
        return group


def _listed(tp: TopicPartitions) -> dict[str, list[int]]:
    return {t: sorted(p) for t, p in tp.items()}


def _unlisted(tp: dict[str, list[int]]) -> TopicPartitions:
    return {t: frozenset(p) for t, p in tp.items()}
