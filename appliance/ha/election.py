"""Which instance of a pair serves: Kafka's own group protocol decides.

Every instance joins the consumer group ``[ha] group`` subscribed to the one-partition
control topic ``<group>.ha``; the member the group's assignment gives that partition is
the active one, the others are standby. The assignor (``assignor``) is cooperative
(KIP-429) and keeps the partition with its newest owner: a standby that joins never moves
it away from a live active, the active is never asked to give it up unless it really lost
it, and an active that resumes after a freeze cannot win it back with a stale claim.
Kafka's coordinator removes a member whose heartbeats stop for ``[ha] session_timeout``
(kill -9, SIGSTOP, a host or network lost), or at once when it leaves (SIGTERM:
``close``), and the rebalance that follows assigns the partition to a standby.

The active also commits the events topic's processed offsets to the group
(``kafka_offsets``), once a second: its checkpoint's newest committed epoch or batch, and
inside a running real-time batch its connector's durable marks.
Those commits double as its lease: Kafka accepts them only from a member of the group's
current generation. The active counts as fenced (it must stop writing) when Kafka took
the partition from it (the rebalance listener says so, at its next heartbeat) or when for
a whole session timeout no commit was accepted and the coordinator did not list it as a
member (it cannot reach Kafka: its partner may already serve). While the group
rebalances no commit is possible, and the coordinator's list of members (``membership``)
keeps a live active's lease however long a slow partner takes to rejoin.

One daemon thread owns the Kafka consumer (kafka-python's is not thread-safe); the
runner asks through thread-safe state only.
"""

from __future__ import annotations

import enum
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kafka import KafkaConsumer, TopicPartition
from kafka.consumer.subscription_state import ConsumerRebalanceListener
from kafka.errors import InvalidSessionTimeoutError, RebalanceInProgressError
from kafka.structs import MemberState, OffsetAndMetadata

from appliance import logs
from appliance.ha.assignor import NewestOwnerAssignor
from appliance.ha.control import HANDOVER, Announcement
from appliance.ha.instance import control_topic
from appliance.ha.membership import MembershipProbe
from appliance.ha.session_bounds import SessionRefused, cluster_bounds, refusal
from appliance.query.checkpoint import committed_offsets

log = logs.get_logger("appliance.ha")

#: How long the election thread's poll waits: the delay before a revoked or lost
#: partition reaches the runner is at most this plus the runner's own check period.
POLL_MS = 200
#: How often the active commits its processed offsets (and so renews its lease).
COMMIT_PERIOD_S = 1.0
METADATA_MAX_AGE_MS = 10_000
#: The heartbeat: a quarter of the session (Kafka's advice: at most a third), so a member
#: misses three before it lapses; never more often than this.
HEARTBEAT_MIN_MS = 250


class Role(enum.IntEnum):
    """``appliance_ha_role``'s values."""

    STANDBY = 0
    ACTIVE = 1
    FENCED = -1  # was active, lost the partition: stopping


@dataclass(frozen=True)
class ElectionSettings:
    group: str
    instance: str
    session_timeout_ms: int
    events_topic: str
    checkpoint_dir: Path  # this instance's own (``instance.instance_config``)

    @property
    def control_topic(self) -> str:
        return control_topic(self.group)


class _Listener(ConsumerRebalanceListener):
    """Kafka's rebalance callbacks, called on the election thread inside ``poll``."""

    def __init__(self, election: Election) -> None:
        self.election = election

    def on_partitions_assigned(self, assigned) -> None:
        self.election._assigned(set(assigned))

    def on_partitions_revoked(self, revoked) -> None:
        self.election._lost(set(revoked), "Kafka's group rebalance took the control "
                                          "partition away (to another instance, or the "
                                          "control topic was deleted)")

    def on_partitions_lost(self, lost) -> None:
        self.election._lost(set(lost), "this instance's group membership lapsed (no "
                                       "heartbeat within the session timeout)")


class Election:
    """This instance's membership of the pair's group; ``start``, ``wait_active``,
    ``fenced``, ``close``."""

    def __init__(self, settings: ElectionSettings, client_config: dict,
                 clock=time.monotonic,
                 processed: Callable[[], dict[int, int]] | None = None) -> None:
        """``processed``: the events topic's processed offsets now (the runner's
        ``QueryProbes.processed``, which for a real-time query sees inside its running
        batch); by default the checkpoint's newest committed epoch or batch."""
        self.settings = settings
        self.client_config = client_config
        self.clock = clock
        self._processed = processed or self._checkpoint_processed
        self._partition = TopicPartition(settings.control_topic, 0)
        self._lock = threading.Lock()
        self._role = Role.STANDBY
        self._became_active = threading.Event()
        self._fence_cause: str | None = None
        self._handover = threading.Event()
        self._closing = threading.Event()
        self._thread: threading.Thread | None = None
        self._consumer: KafkaConsumer | None = None
        self._standby_logged = False
        self._next_commit = 0.0
        self._lease_at = 0.0  # when Kafka last accepted this active's commit or listed it
        self._member_id = ""  # this member's id in the group, as of its last assignment
        self._membership = MembershipProbe(client_config, settings.group,
                                           max(1000, settings.session_timeout_ms // 3))
        self._committed: dict[int, int] = {}
        # Set once the runner said where this active's query starts (``serve_from``):
        # until then its checkpoint is the stale one of its last turn, and committing it
        # would move the pair's offsets back. The start itself (the floor) is committed
        # until the checkpoint commits anything; the event is set once Kafka took it.
        self._serving = threading.Event()
        self._floor: dict[int, int] = {}
        self._floor_committed = threading.Event()
        self._failing: set[str] = set()  # steps failing now (``_trouble``)
        self.joined_at = 0.0
        self.active_at: float | None = None  # monotonic, when the partition came
        self.takeovers = 0  # times this process became active
        self.takeover_s: float | None = None  # assignment to serving, the last time
        self.failure: str | None = None  # the election thread's cause of death
        self.refused: SessionRefused | None = None  # Kafka will not take the session

    def _checkpoint_processed(self) -> dict[int, int]:
        return committed_offsets(self.settings.checkpoint_dir).get(
            self.settings.events_topic, {})

    # -- the runner's side ---------------------------------------------------------------
    @property
    def role(self) -> Role:
        with self._lock:
            return self._role

    def start(self) -> None:
        """Join the group as a standby (again, after ``close``: a step down)."""
        s = self.settings
        with self._lock:
            self._role = Role.STANDBY
            self._fence_cause = None
        self._became_active.clear()
        self._handover.clear()
        self._closing.clear()
        self._standby_logged = False
        self._committed = {}
        self._serving.clear()
        self._floor = {}
        self._floor_committed.clear()
        self.active_at = None
        heartbeat_ms = max(HEARTBEAT_MIN_MS, s.session_timeout_ms // 4)
        self._consumer = KafkaConsumer(**{
            **self.client_config, "group_id": s.group,
            "client_id": f"appliance-ha-{s.instance}", "enable_auto_commit": False,
            "auto_offset_reset": "latest", "session_timeout_ms": s.session_timeout_ms,
            "heartbeat_interval_ms": heartbeat_ms,
            "max_poll_interval_ms": max(10_000, 2 * s.session_timeout_ms),
            # A re-created control topic is found within this (Kafka's default: 5 min);
            # a deleted one is re-created by the runner, with one partition, not by this
            # consumer's metadata requests (a broker's default partitions, racing the
            # rebalance the deletion starts).
            "metadata_max_age_ms": METADATA_MAX_AGE_MS, "allow_auto_create_topics": False,
            "partition_assignment_strategy": (NewestOwnerAssignor,)})
        self._consumer.subscribe([s.control_topic], listener=_Listener(self))
        self.joined_at = self.clock()
        log.info("ha.joining", group=s.group, instance=s.instance, topic=s.control_topic,
                 session_timeout_ms=s.session_timeout_ms)
        self._thread = threading.Thread(target=self._run, name="ha-election", daemon=True)
        self._thread.start()

    def wait_active(self, stop: threading.Event, timeout_s: float | None = None) -> bool:
        """Block while standby: True once active, False if ``stop`` was set or
        ``timeout_s`` passed first. ``SessionRefused`` if Kafka will not take the session
        timeout (exit 2), RuntimeError if the election failed otherwise."""
        deadline = None if timeout_s is None else self.clock() + timeout_s
        while not stop.is_set() and (deadline is None or self.clock() < deadline):
            if self._became_active.wait(0.2):
                return True
            if self.refused is not None:
                raise self.refused
            if self.failure is not None:
                raise RuntimeError(f"ha election failed: {self.failure}")
        return False

    def fenced(self) -> str | None:
        """Why this instance must stop serving now, or None while it may serve."""
        with self._lock:
            return self._fence_cause

    def handover_requested(self) -> bool:
        """An ``appliance ha handover`` came while this instance is the active one."""
        return self._handover.is_set()

    def serve_from(self, floor: dict[int, int], timeout_s: float = 10.0) -> bool:
        """The runner decided where this newly active instance's query starts: from here
        on the election commits the processed offsets (the lease), beginning with
        ``floor``, that start, until the new checkpoint commits anything. A partner
        that takes over before the first epoch or batch commit (a real-time batch takes
        minutes) then starts there, not at a ``latest`` that skips the events sent in
        between. True once Kafka took ``floor`` (or at once for none), within
        ``timeout_s``; the election thread commits it (it owns the consumer)."""
        self._floor_committed.clear()
        self._floor = dict(floor)
        self._next_commit = 0.0
        self._serving.set()
        return not floor or self._floor_committed.wait(timeout_s)

    def served(self, seconds: float) -> None:
        """The query serves, ``seconds`` after the partition came (the takeover's time)."""
        self.takeover_s = seconds

    def close(self) -> None:
        """Commit the last processed offsets and leave the group at once (the standby
        takes over without waiting out a session timeout); safe to call twice."""
        self._closing.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None

    # -- the election thread ------------------------------------------------------------
    def _run(self) -> None:
        consumer = self._consumer
        assert consumer is not None
        try:
            while not self._closing.is_set():
                try:
                    self._read(consumer.poll(timeout_ms=POLL_MS))
                    self._trouble("poll", None)
                except InvalidSessionTimeoutError:  # every retry would be refused alike
                    self.refused = SessionRefused(refusal(
                        self.settings.session_timeout_ms, cluster_bounds(self.client_config)))
                    raise
                except Exception as exc:  # noqa: BLE001 - Kafka away: retry, the lease decides
                    self._trouble("poll", exc)
                    self._closing.wait(1.0)
                if self.role is Role.ACTIVE:
                    self._renew()
                elif not self._standby_logged:
                    self._log_standby(consumer)
        except Exception as exc:  # noqa: BLE001 - said by wait_active and in the log
            self.failure = (str(self.refused) if self.refused is not None
                            else f"{type(exc).__name__}: {exc}")
            log.error("ha.failed", error=" ".join(self.failure.split())[:500])
            self._fence(f"the election thread failed: {self.failure}")  # no lease any more
        finally:
            self._leave(consumer)

    def _read(self, batches: dict) -> None:
        """The control partition's records (the active's only): a handover request."""
        for records in batches.values():
            for record in records:
                found = Announcement.decode(record.value)
                if found is None or found.kind != HANDOVER or self.role is not Role.ACTIVE:
                    continue
                if not self._handover.is_set():
                    self._handover.set()
                    log.info("ha.handover_requested", group=self.settings.group,
                             instance=self.settings.instance, by=found.instance)

    def _assigned(self, assigned: set[TopicPartition]) -> None:
        if self._closing.is_set():
            return
        if self._partition not in assigned:
            return
        with self._lock:
            if self._role is not Role.STANDBY:
                return
            self._role = Role.ACTIVE
        now = self.active_at = self._lease_at = self.clock()
        if self._consumer is not None:
            self._member_id = self._consumer.group_metadata().member_id
        self.takeovers += 1
        self._became_active.set()
        log.info("ha.elected", group=self.settings.group, instance=self.settings.instance,
                 joined_s=round(now - self.joined_at, 2))

    def _log_standby(self, consumer: KafkaConsumer) -> None:
        """``ha.standby`` once this instance is a stable member without the partition."""
        member = consumer.group_metadata()
        if member.state != MemberState.STABLE or self.role is not Role.STANDBY:
            return
        self._standby_logged = True
        log.info("ha.standby", group=self.settings.group, instance=self.settings.instance,
                 member_id=member.member_id, generation=member.generation_id,
                 joined_s=round(self.clock() - self.joined_at, 2))

    def _lost(self, partitions: set[TopicPartition], cause: str) -> None:
        if self._closing.is_set() or self._partition not in partitions:
            return
        self._fence(cause)

    def _fence(self, cause: str) -> None:
        with self._lock:
            if self._role is not Role.ACTIVE:
                return
            self._role = Role.FENCED
            self._fence_cause = cause
        log.warning("ha.fenced", group=self.settings.group, instance=self.settings.instance,
                    cause=cause)

    def _renew(self) -> None:
        """Commit the processed offsets once a period; fence when none was accepted for
        a whole session timeout."""
        now = self.clock()
        if now < self._next_commit:
            return
        self._next_commit = now + COMMIT_PERIOD_S
        if not self._serving.is_set():  # the start is not decided: heartbeats keep the role
            self._lease_at = now
            return
        offsets = self._processed() or self._floor
        if not offsets:  # nothing processed yet: the heartbeats alone keep the role
            self._lease_at = now
            return
        refused = self._commit(offsets)
        if refused is None:
            self._lease_at = now
            if self._floor:  # any accepted commit is at or past where the query began
                self._floor_committed.set()
            return
        if isinstance(refused, RebalanceInProgressError):
            asked = self.clock()
            listed = self._membership.listed(self._member_id)
            self._trouble("membership", None if listed else RuntimeError(
                "the coordinator did not list this member" if listed is False
                else "the coordinator could not be asked"))
            if listed:
                self._lease_at = asked
                return
        silent = now - self._lease_at
        if silent * 1000 >= self.settings.session_timeout_ms:
            self._fence(f"Kafka accepted no offset commit and did not list this member for "
                        f"{silent:.1f} s (the session timeout): the partner may serve already")

    def _commit(self, offsets: dict[int, int]) -> Exception | None:
        """None when Kafka took ``offsets``, else why not."""
        consumer = self._consumer
        assert consumer is not None
        topic = self.settings.events_topic
        try:
            consumer.commit({TopicPartition(topic, p): OffsetAndMetadata(o, "", -1)
                             for p, o in offsets.items()},
                            timeout_ms=max(1000, self.settings.session_timeout_ms // 3))
        except Exception as exc:  # noqa: BLE001 - refused or unreachable: the lease decides
            self._trouble("commit", exc)
            return exc
        self._trouble("commit", None)
        self._member_id = consumer.group_metadata().member_id or self._member_id
        if offsets != self._committed:
            self._committed = dict(offsets)
            log.debug("ha.offsets_committed", topic=topic, offsets=offsets)
        return None

    def _trouble(self, step: str, exc: Exception | None) -> None:
        """One line when a step starts failing (``ha.poll_failed``, ``ha.commit_failed``)
        and one when it works again (``ha.poll_ok``, ``ha.commit_ok``): Kafka down for an
        hour is two lines, not one a second."""
        failing = step in self._failing
        if exc is not None and not failing:
            self._failing.add(step)
            log.warning(f"ha.{step}_failed", error=" ".join(str(exc).split())[:300],
                        kind=type(exc).__name__)
        elif exc is None and failing:
            self._failing.discard(step)
            log.info(f"ha.{step}_ok")

    def _leave(self, consumer: KafkaConsumer) -> None:
        if self.role is Role.ACTIVE and self._serving.is_set():
            offsets = self._processed()
            if offsets:
                self._commit(offsets)
        self._membership.close()
        try:
            consumer.close(autocommit=False, timeout_ms=5000)
        except Exception as exc:  # noqa: BLE001 - the session timeout removes us anyway
            log.warning("ha.leave_failed", error=" ".join(str(exc).split())[:300])
        log.info("ha.left", group=self.settings.group, instance=self.settings.instance,
                 role=self.role.name.lower())
