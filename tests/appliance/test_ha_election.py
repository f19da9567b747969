"""The pair's election through Kafka's group protocol (``appliance.ha``), against the
embedded broker with kafka-python, no Spark: which member serves, how the role moves on
a leave, a kill -9, a SIGSTOP and a handover request, the processed offsets the active
commits, and an instance refused for running another query than its pair's active one."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer

from appliance.broker import EmbeddedBroker
from appliance.config import HA_SESSION_MIN_MS, Config
from appliance.ha.assignor import NewestOwnerAssignor
from appliance.ha.control import Announcement
from appliance.ha.election import COMMIT_PERIOD_S, Election, ElectionSettings, Role
from appliance.ha.handover import HandoverError, hand_over
from appliance.ha.kafka_offsets import group_offsets, reset_checkpoint, starting_offsets
from appliance.ha.partner import PartnerMismatch, check_partner, pair_facts
from appliance.ha.session_bounds import SessionRefused, check_session
from appliance.ha.takeover import (
    announce_serving,
    ensure_control_topic,
    start_from_kafka,
    step_down,
)
from appliance.process.logwatch import log_events, wait_for_event

from support.child_env import child_env

SESSION_MS = 6000
SHORT_SESSION_MS = 2000  # [ha] session_timeout's default, on a broker that takes it
MEMBER = Path(__file__).with_name("ha_member.py")


@pytest.fixture(scope="module")
def short_broker(tmp_path_factory):
    """A broker that takes sessions down to ``[ha]``'s floor, as the appliance's embedded
    one does (the shared ``broker`` keeps Kafka's 6 s minimum)."""
    log_dir = tmp_path_factory.mktemp("short-broker")
    with EmbeddedBroker(log_path=log_dir / "broker.log", extra_args=[
            "--group-min-session-timeout-ms", str(HA_SESSION_MIN_MS)]) as b:
        yield b


@pytest.fixture
def pair(broker):
    """``(group, events_topic)``, fresh, with the control topic created."""
    group = f"pair-{uuid.uuid4().hex[:8]}"
    events = f"ha-events-{uuid.uuid4().hex[:8]}"
    broker.create_topics({f"{group}.ha": 1, events: 2})
    return group, events


def election(broker, group: str, events: str, name: str, checkpoint: Path,
             session_ms: int = SESSION_MS) -> Election:
    e = Election(ElectionSettings(group, name, session_ms, events, checkpoint),
                 {"bootstrap_servers": broker.bootstrap.split(",")})
    e.start()
    return e


def active_within(e: Election, seconds: float) -> float:
    started = time.monotonic()
    stop = threading.Event()
    threading.Timer(seconds, stop.set).start()
    assert e.wait_active(stop), f"{e.settings.instance} not active within {seconds} s"
    stop.set()
    return time.monotonic() - started


class Member:
    """``ha_member.py`` as a child process, its JSON log in a file."""

    def __init__(self, broker, group: str, name: str, tmp_path: Path, stop_s: float = 0.0,
                 session_ms: int = SESSION_MS):
        self.log = tmp_path / f"{name}.log"
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, str(MEMBER), broker.bootstrap, group, name,
                 str(tmp_path / name), str(stop_s), str(session_ms)], stderr=out, stdout=out,
                env=child_env())

    def wait_for(self, event: str, timeout: float = 60) -> dict:
        return wait_for_event(self.log, event, self.proc, timeout)

    def cleanup(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def fake_checkpoint(root: Path, topic: str, offsets: dict[int, int]) -> None:
    """Batch 0 committed, with ``offsets`` as Spark's offset log writes them."""
    (root / "commits").mkdir(parents=True)
    (root / "offsets").mkdir()
    (root / "commits" / "0").write_text('v1\n{"nextBatchWatermarkMs":0}\n')
    (root / "offsets" / "0").write_text(
        "v1\n{}\n" + json.dumps({topic: {str(p): o for p, o in offsets.items()}}) + "\n")


def test_one_member_serves_a_newcomer_waits_and_a_leave_hands_over_at_once(
        broker, pair, tmp_path):
    group, events = pair
    first = election(broker, group, events, "a", tmp_path / "a")
    second = None
    try:
        active_within(first, 30)
        second = election(broker, group, events, "b", tmp_path / "b")
        time.sleep(SESSION_MS / 1000)  # the newcomer's rebalance is over
        assert (first.role, second.role) == (Role.ACTIVE, Role.STANDBY)  # sticky
        assert first.fenced() is None
        first.close()  # SIGTERM's path: leave the group
        took = active_within(second, SESSION_MS / 1000)
        assert took < SESSION_MS / 1000 - 1, took  # not a session timeout's wait
        assert second.takeovers == 1
    finally:
        for e in (first, second):
            if e is not None:
                e.close()


def test_kill_9_of_the_active_hands_over_within_the_session_timeout(broker, pair, tmp_path):
    group, events = pair
    member = Member(broker, group, "a", tmp_path)
    standby = None
    try:
        member.wait_for("ha.elected")
        standby = election(broker, group, events, "b", tmp_path / "b")
        time.sleep(3)
        assert standby.role is Role.STANDBY
        member.proc.kill()
        took = active_within(standby, SESSION_MS / 1000 + 10)
        assert took <= SESSION_MS / 1000 + 3, took
    finally:
        member.cleanup()
        if standby is not None:
            standby.close()


def test_with_a_short_session_a_kill_9_hands_over_before_kafkas_default_could(
        short_broker, tmp_path):
    """[ha]'s default session (2 s) on a broker that takes it: the standby is elected
    sooner than Kafka's default minimum session (6 s) would even let the active lapse."""
    group, events = f"pair-{uuid.uuid4().hex[:8]}", f"ha-events-{uuid.uuid4().hex[:8]}"
    short_broker.create_topics({f"{group}.ha": 1, events: 2})
    member = Member(short_broker, group, "a", tmp_path, session_ms=SHORT_SESSION_MS)
    standby = None
    try:
        member.wait_for("ha.elected")
        standby = election(short_broker, group, events, "b", tmp_path / "b",
                           session_ms=SHORT_SESSION_MS)
        time.sleep(3 * SHORT_SESSION_MS / 1000)  # heartbeats go on: nobody lapses
        assert standby.role is Role.STANDBY and member.proc.poll() is None
        member.proc.kill()
        took = active_within(standby, SESSION_MS / 1000 + 10)
        assert took < SESSION_MS / 1000, took
    finally:
        member.cleanup()
        if standby is not None:
            standby.close()


def test_a_rebalance_longer_than_the_session_does_not_fence_a_live_active(
        short_broker, tmp_path):
    """A partner slow to rejoin (its host busy starting a JVM) holds the group's rebalance
    for seconds, longer than the 2 s session, and no commit is possible meanwhile: the
    active, still listed by the coordinator, keeps serving (it fenced itself with no
    fault before, a gap at every partner's start)."""
    group, events = f"pair-{uuid.uuid4().hex[:8]}", f"ha-events-{uuid.uuid4().hex[:8]}"
    short_broker.create_topics({f"{group}.ha": 1, events: 2})
    fake_checkpoint(tmp_path / "a", events, {0: 3, 1: 4})
    active = election(short_broker, group, events, "a", tmp_path / "a",
                      session_ms=SHORT_SESSION_MS)
    slow = newcomer = None
    try:
        active_within(active, 30)
        assert active.serve_from({})
        # The slow member: joined, then polled no more; its heartbeats go on, so the
        # coordinator waits for it to rejoin until its poll interval ends.
        slow = KafkaConsumer(bootstrap_servers=short_broker.bootstrap.split(","),
                             group_id=group, session_timeout_ms=SHORT_SESSION_MS,
                             heartbeat_interval_ms=500, max_poll_interval_ms=8000,
                             partition_assignment_strategy=(NewestOwnerAssignor,))
        slow.subscribe([f"{group}.ha"])
        deadline = time.monotonic() + 30
        while slow.group_metadata().generation_id < 0 or active.role is not Role.ACTIVE:
            assert time.monotonic() < deadline, "the slow member never joined"
            slow.poll(timeout_ms=200)
        slow.poll(timeout_ms=1000)  # the follow-up round, if any: then it polls no more
        joined = time.monotonic()
        newcomer = election(short_broker, group, events, "b", tmp_path / "b",
                            session_ms=SHORT_SESSION_MS)
        while not newcomer._standby_logged:
            assert time.monotonic() < joined + 30, "the newcomer never became a standby"
            assert active.fenced() is None, active.fenced()
            time.sleep(0.1)
        held = time.monotonic() - joined
        assert held > 2 * SHORT_SESSION_MS / 1000, held  # the rebalance outlasted sessions
        assert (active.role, newcomer.role) == (Role.ACTIVE, Role.STANDBY)
        assert active.fenced() is None and active.takeovers == 1
    finally:
        for e in (active, newcomer):
            if e is not None:
                e.close()
        if slow is not None:
            slow.close(autocommit=False)


def test_a_session_kafka_refuses_is_one_line_not_a_retry_loop(broker, pair, tmp_path):
    """The shared broker keeps Kafka's 6 s minimum: a 2 s session is refused before the
    join (the preflight) and, were it tried, at the join itself (what a cluster that
    does not let the appliance describe its configs says), with the same line."""
    group, events = pair
    line = ("ha.session_timeout: 2 s is not a session this Kafka cluster takes: it accepts "
            "sessions of at least 6 s (group.min.session.timeout.ms=6000); set [ha] "
            "session_timeout (or APPLIANCE_HA_SESSION_TIMEOUT) to 6 s or more, or lower "
            "the cluster's group.min.session.timeout.ms")
    client = {"bootstrap_servers": broker.bootstrap.split(",")}
    with pytest.raises(SessionRefused) as before:
        check_session(SHORT_SESSION_MS, client)
    assert str(before.value) == line
    check_session(SESSION_MS, client)  # taken
    e = election(broker, group, events, "a", tmp_path / "a", session_ms=SHORT_SESSION_MS)
    try:
        with pytest.raises(SessionRefused) as joined:
            active_within(e, 30)
        assert str(joined.value) == line
        assert e.role is Role.STANDBY
    finally:
        e.close()


def test_an_active_stopped_past_its_session_is_fenced_when_it_resumes(broker, pair, tmp_path):
    group, events = pair
    # It takes 3 s to leave once fenced (an appliance stops its query first): meanwhile its
    # consumer rejoins, still claiming the partition it held, and must not win it back.
    member = Member(broker, group, "a", tmp_path, stop_s=3.0)
    standby = None
    try:
        member.wait_for("ha.elected")
        standby = election(broker, group, events, "b", tmp_path / "b")
        time.sleep(3)
        member.proc.send_signal(signal.SIGSTOP)
        active_within(standby, SESSION_MS / 1000 + 10)
        member.proc.send_signal(signal.SIGCONT)
        fenced = member.wait_for("ha.fenced", timeout=SESSION_MS / 1000 + 10)
        assert "lapsed" in fenced["cause"] or "another instance" in fenced["cause"], fenced
        assert member.proc.wait(timeout=30) == 0  # ha_member closes once fenced
        assert standby.role is Role.ACTIVE and standby.fenced() is None, standby.fenced()
        assert standby.takeovers == 1
    finally:
        member.cleanup()
        if standby is not None:
            standby.close()


def test_the_active_commits_its_checkpoints_processed_offsets_to_the_group(
        broker, pair, tmp_path):
    group, events = pair
    config = {"bootstrap_servers": broker.bootstrap.split(",")}
    own = tmp_path / "a"
    fake_checkpoint(own, events, {0: 42, 1: 7})
    e = election(broker, group, events, "a", own)
    try:
        assert group_offsets(config, group, events, 2) == {}  # only once active
        active_within(e, 30)
        # Elected, but its start not decided: its checkpoint may be the stale one of its
        # last turn, and committing it would move the pair's offsets back.
        time.sleep(2 * COMMIT_PERIOD_S + 0.5)
        assert group_offsets(config, group, events, 2) == {}
        assert e.serve_from({})
        deadline = time.monotonic() + 10
        while group_offsets(config, group, events, 2) != {0: 42, 1: 7}:
            assert time.monotonic() < deadline, group_offsets(config, group, events, 2)
            time.sleep(0.3)
    finally:
        e.close()
    # A new active starts there, naming every partition (earliest where none was
    # committed), from a fresh checkpoint.
    assert json.loads(starting_offsets(events, {0: 42}, 3)) == {
        events: {"0": 42, "1": -2, "2": -2}}
    aside = reset_checkpoint(own)
    assert aside is not None and (aside / "offsets" / "0").exists() and not own.exists()
    assert reset_checkpoint(own) is None


@pytest.mark.parametrize("spec, expect", [
    ("latest", {0: 5, 1: 3}),       # today's end offsets: what "latest" meant at the start
    ("earliest", {0: 0, 1: 0}),
])
def test_a_pairs_first_start_commits_where_its_query_begins_before_it_serves(
        broker, pair, tmp_path, spec, expect):
    """No offsets in the group yet: the first active's exact start goes to Kafka before
    its query serves, so a partner taking over before the first commit (a real-time
    batch commits minutes later) starts there, not at a "latest" of its own: the bench
    lost 825 alerts that way, the events sent while neither served."""
    group, events = pair
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    for part, count in ((0, 5), (1, 3)):
        for _ in range(count):
            producer.send(events, b"{}", partition=part)
    producer.flush()
    producer.close()
    config = Config.model_validate({
        "kafka": {"bootstrap_servers": broker.bootstrap}, "topics": {"events": events},
        "query": {"checkpoint_dir": str(tmp_path / "a"),
                  "starting_offsets": spec},
        "ha": {"group": group}})
    client = {"bootstrap_servers": broker.bootstrap.split(",")}
    e = election(broker, group, events, "a", tmp_path / "a")
    try:
        active_within(e, 30)
        start = start_from_kafka(config, client, 2, e)
    finally:
        e.close()
    assert start is not None
    assert json.loads(start) == {events: {str(p): o for p, o in expect.items()}}
    assert group_offsets(client, group, events, 2) == expect
    # The partner now starts there, from Kafka.
    assert json.loads(start_from_kafka(config, client, 2)) == json.loads(start)


def test_a_first_active_resuming_its_own_checkpoint_commits_that_checkpoint(
        broker, pair, tmp_path):
    group, events = pair
    fake_checkpoint(tmp_path / "a", events, {0: 4, 1: 1})
    config = Config.model_validate({
        "kafka": {"bootstrap_servers": broker.bootstrap}, "topics": {"events": events},
        "query": {"checkpoint_dir": str(tmp_path / "a"), "starting_offsets": "latest"},
        "ha": {"group": group}})
    client = {"bootstrap_servers": broker.bootstrap.split(",")}
    e = election(broker, group, events, "a", tmp_path / "a")
    try:
        active_within(e, 30)
        assert start_from_kafka(config, client, 2, e) is None  # it resumes its checkpoint
        assert group_offsets(client, group, events, 2) == {0: 4, 1: 1}
    finally:
        e.close()
    assert (tmp_path / "a" / "commits" / "0").exists()  # not moved aside


def test_a_handover_request_moves_the_role_and_the_old_active_waits_as_standby(
        broker, pair, tmp_path):
    group, events = pair
    config = Config.model_validate({"kafka": {"bootstrap_servers": broker.bootstrap},
                                    "ha": {"group": group}})
    client = {"bootstrap_servers": broker.bootstrap.split(",")}
    first = election(broker, group, events, "a", tmp_path / "a")
    second = None
    stopped: list[float] = []
    try:
        active_within(first, 30)
        with pytest.raises(HandoverError, match="1 member"):  # nobody to hand over to
            hand_over(config, group, timeout_s=5)
        second = election(broker, group, events, "b", tmp_path / "b")
        time.sleep(3)

        def runner_of_first() -> None:  # what the runner's serve loop does, without Spark
            while not first.handover_requested():
                time.sleep(0.1)
            step_down(first, client, lambda: stopped.append(time.monotonic()))
            first.start()

        def runner_of_second() -> None:
            if second.wait_active(threading.Event()):
                announce_serving(second, client)

        threads = [threading.Thread(target=f, daemon=True)
                   for f in (runner_of_first, runner_of_second)]
        for t in threads:
            t.start()
        done = hand_over(config, group, timeout_s=60)
        assert done.to == "b" and done.group == group
        for t in threads:
            t.join(timeout=60)
        assert stopped, "the old active's query was not stopped"
        assert second.active_at is not None and second.active_at < stopped[0]  # overlap
        time.sleep(3)
        assert (first.role, second.role) == (Role.STANDBY, Role.ACTIVE)
    finally:
        for e in (first, second):
            if e is not None:
                e.close()


def test_an_instance_that_runs_another_query_than_the_live_active_is_refused(
        broker, pair, tmp_path):
    group, events = pair
    client = {"bootstrap_servers": broker.bootstrap.split(",")}

    def config(trigger: str) -> Config:
        return Config.model_validate({
            "kafka": {"bootstrap_servers": broker.bootstrap},
            "query": {"trigger": trigger}, "ha": {"group": group, "instance": "c"}})

    active = election(broker, group, events, "a", tmp_path / "a")
    try:
        active_within(active, 30)
        announce_serving(active, client, pair_facts(config("continuous"), "v1"))
        check_partner(config("continuous"), client, pair_facts(config("continuous"), "v1"))
        with pytest.raises(PartnerMismatch) as refused:
            check_partner(config("microbatch"), client, pair_facts(config("microbatch"), "v1"))
        assert str(refused.value) == (
            f"ha.group {group}: query.trigger is 'microbatch' here but 'continuous' on the "
            f"pair's active instance a: both instances of a pair run one query (make them "
            f"agree, or stop both to change it)")
        with pytest.raises(PartnerMismatch, match="rules.version is 'v2' here but 'v1'"):
            check_partner(config("continuous"), client, pair_facts(config("continuous"), "v2"))
    finally:
        active.close()
    # Nobody live: this instance's settings become the pair's.
    check_partner(config("microbatch"), client, pair_facts(config("microbatch"), "v2"))
    assert Announcement.decode(b"not json") is None and Announcement.decode(b"[]") is None


def test_a_deleted_control_topic_is_recreated_and_one_instance_serves(broker, pair, tmp_path):
    group, events = pair
    client = {"bootstrap_servers": broker.bootstrap.split(",")}
    first = election(broker, group, events, "a", tmp_path / "a")
    second = None
    try:
        active_within(first, 30)
        second = election(broker, group, events, "b", tmp_path / "b")
        time.sleep(3)
        admin = KafkaAdminClient(**client)
        try:
            admin.delete_topics([f"{group}.ha"])
        finally:
            admin.close()
        time.sleep(5)  # the active may lose the partition now, or keep it: either is safe
        ensure_control_topic(client, group)  # what a waiting instance does every 10 s
        members = (first, second)

        def serving() -> list[Election]:
            for e in members:
                if e.fenced() is not None:  # the runner's step down: leave, rejoin
                    e.close()
                    e.start()
            return [e for e in members if e.role is Role.ACTIVE]

        deadline = time.monotonic() + 40
        while len(serving()) != 1:
            assert time.monotonic() < deadline, [e.role for e in members]
            time.sleep(0.2)
        time.sleep(3)
        assert len(serving()) == 1, [e.role for e in members]  # and it stays so
    finally:
        for e in (first, second):
            if e is not None:
                e.close()


def test_kafka_down_the_active_fences_itself_after_a_session_with_one_line(tmp_path):
    own = EmbeddedBroker(log_path=tmp_path / "broker.log").start()
    group = "pair-down"
    member = None
    try:
        own.create_topics({f"{group}.ha": 1, "events": 2})
        fake_checkpoint(tmp_path / "a", "events", {0: 5, 1: 6})
        member = Member(own, group, "a", tmp_path)
        try:
            member.wait_for("ha.elected")
            time.sleep(2)  # a commit or two accepted: the lease is running
        finally:
            own.stop()
        fenced = member.wait_for("ha.fenced", timeout=SESSION_MS / 1000 + 20)
        assert "accepted no offset commit" in fenced["cause"], fenced
        events = [e["event"] for e in log_events(member.log)]
        assert events.count("ha.commit_failed") == 1, events  # not one a second
        member.proc.wait(timeout=60)
    finally:
        if member is not None:
            member.cleanup()
        own.stop()
