"""KIP-848 consumer groups over raw requests: epochs, revocation before reassignment, and
the errors clients act on (FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH,
GROUP_ID_NOT_FOUND, INCONSISTENT_GROUP_PROTOCOL, UNSUPPORTED_ASSIGNOR).

The real clients' tests (test_consumer_groups_clients.py) show that groups work; these
drive members by hand so each step of the reconciliation can be checked: a partition
moves only after its owner acknowledged giving it up.
"""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from test_group_protocol import join_body

from appliance.broker import EmbeddedBroker
from appliance.broker.caller import Caller
from appliance.broker.groups.assignors import AssignorInput, range_, uniform
from appliance.broker.groups.consumer_groups import ConsumerGroupCoordinator, HeartbeatRequest
from appliance.broker.groups.offsets import LOG_NAME, OffsetStore
from appliance.broker.settings import BrokerConfig
from appliance.broker.wire import errors, schemas
from appliance.broker.wire.client import WireClient

TOPIC = "kp"


@pytest.fixture(scope="module")
def kbroker(tmp_path_factory):
    b = EmbeddedBroker(topics={TOPIC: 6, "kp-other": 2},
                       extra_args=["--group-consumer-heartbeat-interval-ms", "200",
                                   "--group-consumer-session-timeout-ms", "3000"],
                       log_path=tmp_path_factory.mktemp("kp") / "broker.log")
    b.start()
    yield b
    b.stop()


def unique(name: str) -> str:
    return f"{name}-{time.monotonic_ns()}"


class Member:
    """One hand-driven member: its id, epoch and what it owns (topic id -> partitions)."""

    def __init__(self, c: WireClient, group: str, topics=(TOPIC,), regex: str | None = None,
                 assignor: str | None = None, instance: str | None = None,
                 rebalance_ms: int = 5000) -> None:
        self.c, self.group, self.instance = c, group, instance
        self.rebalance_ms = rebalance_ms
        self.member_id = str(uuid.uuid4())
        self.epoch = 0
        self.owned: dict[bytes, list[int]] = {}
        self.topics, self.regex, self.assignor = list(topics), regex, assignor

    def heartbeat(self, epoch: int | None = None, owned: dict | None = None,
                  full: bool = False) -> dict:
        first = self.epoch == 0
        sent_owned = self.owned if owned is None else owned
        resp = self.c.request(schemas.CONSUMER_GROUP_HEARTBEAT, 1, {
            "group_id": self.group, "member_id": self.member_id,
            "member_epoch": self.epoch if epoch is None else epoch,
            "instance_id": self.instance, "rack_id": None,
            "rebalance_timeout_ms": self.rebalance_ms if first or full else -1,
            "subscribed_topic_names": self.topics if first or full else None,
            "subscribed_topic_regex": self.regex if first or full else None,
            "server_assignor": self.assignor if first or full else None,
            "topic_partitions": [{"topic_id": t, "partitions": p}
                                 for t, p in sent_owned.items()]})
        if resp["error_code"] == errors.NONE and (epoch is None or epoch >= 0):
            self.epoch = resp["member_epoch"]
            if resp["assignment"] is not None:
                self.owned = {t["topic_id"]: t["partitions"]
                              for t in resp["assignment"]["topic_partitions"]}
        return resp

    def partitions(self) -> set[int]:
        return {p for parts in self.owned.values() for p in parts}


def settle(members: list[Member], rounds: int = 8) -> None:
    for _ in range(rounds):
        for m in members:
            assert m.heartbeat()["error_code"] == errors.NONE


def test_two_members_share_and_a_partition_moves_only_after_its_revocation(kbroker):
    group = unique("kg")
    with WireClient(kbroker.bootstrap) as c1, WireClient(kbroker.bootstrap) as c2:
        a = Member(c1, group)
        first = a.heartbeat()
        assert first["error_code"] == errors.NONE
        assert first["member_id"] == a.member_id and first["member_epoch"] == 1
        assert a.partitions() == set(range(6))
        assert first["heartbeat_interval_ms"] == 200
        b = Member(c2, group)
        b.heartbeat()
        assert b.partitions() == set()  # a still owns all six: nothing moves yet
        a_resp = a.heartbeat()  # a is told to keep three: it revokes the other three
        assert len(a.partitions()) == 3 and a_resp["member_epoch"] == 1
        b.heartbeat()
        assert b.partitions() == set()  # a has not acknowledged yet (it sent six owned)
        a.heartbeat()  # now a's owned list lacks them: released, a moves to the new epoch
        assert a.epoch == 2
        b.heartbeat()
        assert b.partitions() == set(range(6)) - a.partitions() and len(b.partitions()) == 3
        assert b.epoch == 2


def test_a_member_leaving_hands_its_partitions_over(kbroker):
    group = unique("kl")
    with WireClient(kbroker.bootstrap) as c1, WireClient(kbroker.bootstrap) as c2:
        a, b = Member(c1, group), Member(c2, group)
        a.heartbeat()
        b.heartbeat()
        settle([a, b])
        assert a.partitions() | b.partitions() == set(range(6))
        assert not a.partitions() & b.partitions()
        left = b.heartbeat(epoch=-1)
        assert left["error_code"] == errors.NONE and left["member_epoch"] == -1
        settle([a], rounds=2)
        assert a.partitions() == set(range(6))
        assert b.heartbeat(epoch=b.epoch)["error_code"] == errors.UNKNOWN_MEMBER_ID


def test_a_member_that_never_revokes_is_removed_after_its_rebalance_timeout(kbroker):
    group = unique("kt")
    with WireClient(kbroker.bootstrap) as c1, WireClient(kbroker.bootstrap) as c2:
        stubborn = Member(c1, group, rebalance_ms=500)
        stubborn.heartbeat()
        everything = dict(stubborn.owned)
        b = Member(c2, group)
        b.heartbeat()
        stubborn.heartbeat(owned=everything)  # told to give three up; claims all six
        assert len(stubborn.partitions()) == 3
        stubborn.heartbeat(owned=everything)  # still claiming them
        time.sleep(1.0)
        assert stubborn.heartbeat(owned=everything)["error_code"] == errors.UNKNOWN_MEMBER_ID
        settle([b], rounds=2)
        assert b.partitions() == set(range(6))


def test_epochs_are_fenced_as_kafka_fences_them(kbroker):
    group = unique("kf")
    with WireClient(kbroker.bootstrap) as c:
        a = Member(c, group)
        a.heartbeat()
        assert a.heartbeat(epoch=a.epoch + 5)["error_code"] == errors.FENCED_MEMBER_EPOCH
        stranger = Member(c, group)
        stranger.epoch = 3
        resp = stranger.heartbeat()
        assert resp["error_code"] == errors.UNKNOWN_MEMBER_ID and resp["member_epoch"] == -1
        # a rejoin with epoch 0 and the same id starts the member again
        a.epoch, a.owned = 0, {}
        assert a.heartbeat()["error_code"] == errors.NONE
        assert a.partitions() == set(range(6))


def test_a_lost_answer_is_forgiven_only_for_the_previous_epoch(kbroker):
    group = unique("kp")
    with WireClient(kbroker.bootstrap) as c1, WireClient(kbroker.bootstrap) as c2:
        a, b = Member(c1, group), Member(c2, group)
        a.heartbeat()
        everything = dict(a.owned)
        previous = a.epoch
        b.heartbeat()
        settle([a, b])
        assert a.epoch > previous
        # as if a never got the answer that moved it on: its previous epoch, owning
        # only what is still its own, is accepted ...
        assert a.heartbeat(epoch=previous)["error_code"] == errors.NONE
        # ... but not while claiming what went to b
        resp = a.heartbeat(epoch=previous, owned=everything)
        assert resp["error_code"] == errors.FENCED_MEMBER_EPOCH


def test_errors_for_bad_requests_and_assignors(kbroker):
    with WireClient(kbroker.bootstrap) as c:
        m = Member(c, unique("ke"), assignor="sticky-nonsense")
        assert m.heartbeat()["error_code"] == errors.UNSUPPORTED_ASSIGNOR
        m = Member(c, unique("ke"), regex="([")
        assert m.heartbeat()["error_code"] == errors.INVALID_REGULAR_EXPRESSION
        m = Member(c, "")
        assert m.heartbeat()["error_code"] == errors.INVALID_REQUEST
        m = Member(c, unique("ke"))
        m.member_id = ""
        assert m.heartbeat()["error_code"] == errors.INVALID_REQUEST


def test_regex_subscription_and_the_range_assignor(kbroker):
    group = unique("kr")
    with WireClient(kbroker.bootstrap) as c1, WireClient(kbroker.bootstrap) as c2:
        a = Member(c1, group, topics=(), regex="kp(-other)?", assignor="range")
        b = Member(c2, group, topics=(), regex="kp(-other)?", assignor="range")
        a.heartbeat()
        b.heartbeat()
        settle([a, b])
        assert sum(len(p) for p in a.owned.values()) == 4  # 3 of kp, 1 of kp-other
        assert sum(len(p) for p in b.owned.values()) == 4
        d = c1.request(schemas.CONSUMER_GROUP_DESCRIBE, 1, {
            "group_ids": [group], "include_authorized_operations": False})["groups"][0]
        assert d["error_code"] == errors.NONE and d["assignor_name"] == "range"
        assert d["group_state"] == "Stable" and len(d["members"]) == 2
        assert {m["subscribed_topic_regex"] for m in d["members"]} == {"kp(-other)?"}
        names = {t["topic_name"] for m in d["members"]
                 for t in m["assignment"]["topic_partitions"]}
        assert names == {TOPIC, "kp-other"}


def test_offsets_of_a_consumer_group_check_the_member_epoch(kbroker):
    group = unique("ko")
    with WireClient(kbroker.bootstrap) as c:
        a = Member(c, group)
        a.heartbeat()

        def commit(member_id: str, epoch: int, version: int = 9) -> int:
            return c.request(schemas.OFFSET_COMMIT, version, {
                "group_id": group, "generation_id": epoch, "member_id": member_id,
                "group_instance_id": None, "topics": [{"name": TOPIC, "partitions": [
                    {"partition_index": 0, "committed_offset": 7,
                     "committed_leader_epoch": -1, "committed_metadata": None}]}]}
            )["topics"][0]["partitions"][0]["error_code"]

        assert commit(a.member_id, a.epoch) == errors.NONE
        assert commit(a.member_id, a.epoch + 1) == errors.STALE_MEMBER_EPOCH
        assert commit("nobody", 1) == errors.UNKNOWN_MEMBER_ID
        fetched = c.request(schemas.OFFSET_FETCH, 9, {"groups": [{
            "group_id": group, "member_id": a.member_id, "member_epoch": a.epoch,
            "topics": [{"name": TOPIC, "partition_indexes": [0]}]}],
            "require_stable": True})["groups"][0]
        assert fetched["error_code"] == errors.NONE
        assert fetched["topics"][0]["partitions"][0]["committed_offset"] == 7
        stale = c.request(schemas.OFFSET_FETCH, 9, {"groups": [{
            "group_id": group, "member_id": a.member_id, "member_epoch": a.epoch + 3,
            "topics": None}], "require_stable": True})["groups"][0]
        assert stale["error_code"] == errors.STALE_MEMBER_EPOCH


def test_a_group_is_classic_or_consumer_never_both(kbroker):
    with WireClient(kbroker.bootstrap) as c:
        group = unique("kc")
        Member(c, group).heartbeat()
        joined = c.request(schemas.JOIN_GROUP, 5, join_body(group))
        assert joined["error_code"] == errors.INCONSISTENT_GROUP_PROTOCOL
        listed = c.request(schemas.LIST_GROUPS, 5, {"states_filter": [],
                                                    "types_filter": ["consumer"]})
        assert [g for g in listed["groups"] if g["group_id"] == group] == [
            {"group_id": group, "protocol_type": "consumer", "group_state": "Stable",
             "group_type": "consumer"}]
        classic = unique("kc-classic")
        pending = c.request(schemas.JOIN_GROUP, 5, join_body(classic, session=6000))
        assert pending["error_code"] == errors.MEMBER_ID_REQUIRED  # a classic member-to-be
        d = c.request(schemas.CONSUMER_GROUP_DESCRIBE, 0, {
            "group_ids": [classic, unique("nothing")],
            "include_authorized_operations": False})["groups"]
        assert [g["error_code"] for g in d] == [errors.GROUP_ID_NOT_FOUND] * 2
        # a consumer-protocol member cannot join a classic group that has members ...
        assert Member(c, classic).heartbeat()["error_code"] == errors.GROUP_ID_NOT_FOUND
        # ... but takes over one that only has committed offsets, which it keeps
        offsets_only = unique("kc-offsets")
        c.request(schemas.OFFSET_COMMIT, 8, {
            "group_id": offsets_only, "generation_id": -1, "member_id": "",
            "group_instance_id": None, "topics": [{"name": TOPIC, "partitions": [
                {"partition_index": 2, "committed_offset": 4, "committed_leader_epoch": -1,
                 "committed_metadata": None}]}]})
        taker = Member(c, offsets_only)
        assert taker.heartbeat()["error_code"] == errors.NONE
        fetched = c.request(schemas.OFFSET_FETCH, 9, {"groups": [{
            "group_id": offsets_only, "member_id": taker.member_id,
            "member_epoch": taker.epoch, "topics": None}], "require_stable": True})
        assert fetched["groups"][0]["topics"][0]["partitions"][0]["committed_offset"] == 4


def test_static_leave_keeps_the_assignment_for_the_same_instance(kbroker):
    group = unique("ks")
    with WireClient(kbroker.bootstrap) as c1, WireClient(kbroker.bootstrap) as c2:
        a = Member(c1, group, instance="i-a")
        b = Member(c2, group, instance="i-b")
        a.heartbeat()
        b.heartbeat()
        settle([a, b])
        kept = b.partitions()
        assert b.heartbeat(epoch=-2)["error_code"] == errors.NONE
        settle([a], rounds=2)
        assert a.partitions() == set(range(6)) - kept  # nothing moved to a
        again = Member(c2, group, instance="i-b")
        assert again.heartbeat()["error_code"] == errors.NONE
        assert again.partitions() == kept
        twin = Member(c1, group, instance="i-b")
        assert twin.heartbeat()["error_code"] == errors.UNRELEASED_INSTANCE_ID


def test_assignors_spread_evenly_and_stick():
    subs = {m: frozenset({"t"}) for m in ("a", "b", "c")}
    first = uniform(AssignorInput(subs, {"t": 7}, {}))
    sizes = sorted(len(first[m].get("t", ())) for m in subs)
    assert sizes == [2, 2, 3]
    fewer = {m: s for m, s in subs.items() if m != "c"}
    second = uniform(AssignorInput(fewer, {"t": 7}, first))
    for m in fewer:  # a and b keep what they had
        assert first[m]["t"] <= second[m]["t"]
    # a fourth member joining three at two partitions each of six gets its share (it got
    # none while every member could keep up to the rounded-up share), and only one moves
    six = uniform(AssignorInput(subs, {"t": 6}, {}))
    more = {**subs, "d": frozenset({"t"})}
    after = uniform(AssignorInput(more, {"t": 6}, six))
    assert sorted(len(after[m].get("t", ())) for m in more) == [1, 1, 2, 2]
    assert sum(len(six[m]["t"] - after[m].get("t", frozenset())) for m in subs) == 1
    assert range_(AssignorInput(fewer, {"t": 5}, {})) == {
        "a": {"t": frozenset({0, 1, 2})}, "b": {"t": frozenset({3, 4})}}


def test_delete_groups_refuses_a_consumer_group_with_members(kbroker):
    group = unique("kd")
    with WireClient(kbroker.bootstrap) as c:
        a = Member(c, group)
        a.heartbeat()

        def delete() -> int:
            return c.request(schemas.DELETE_GROUPS, 2, {"groups_names": [group]})[
                "results"][0]["error_code"]

        assert delete() == errors.NON_EMPTY_GROUP
        c.request(schemas.OFFSET_COMMIT, 9, {
            "group_id": group, "generation_id": a.epoch, "member_id": a.member_id,
            "group_instance_id": None, "topics": [{"name": TOPIC, "partitions": [
                {"partition_index": 1, "committed_offset": 3, "committed_leader_epoch": -1,
                 "committed_metadata": None}]}]})
        a.heartbeat(epoch=-1)  # empty now, kept for its committed offsets
        assert delete() == errors.NONE
        assert delete() == errors.GROUP_ID_NOT_FOUND


def test_an_empty_consumer_group_expires_with_its_offsets(tmp_path):
    with EmbeddedBroker(topics={TOPIC: 2}, log_path=tmp_path / "broker.log",
                        extra_args=["--offsets-retention-minutes", "0.02"]) as b, \
            WireClient(b.bootstrap) as c:
        group = unique("kx")
        a = Member(c, group)
        a.heartbeat()
        c.request(schemas.OFFSET_COMMIT, 9, {
            "group_id": group, "generation_id": a.epoch, "member_id": a.member_id,
            "group_instance_id": None, "topics": [{"name": TOPIC, "partitions": [
                {"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
                 "committed_metadata": None}]}]})
        a.heartbeat(epoch=-1)

        def listed() -> list[str]:
            return [g["group_id"] for g in c.request(schemas.LIST_GROUPS, 5, {
                "states_filter": [], "types_filter": []})["groups"]]

        assert listed() == [group]
        deadline = time.monotonic() + 20
        while listed() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert listed() == []


def test_the_group_is_written_on_change_only_and_read_back(tmp_path):
    """The coordinator over a real offsets log: a steady heartbeat writes nothing, and a
    coordinator started on the same data directory has the group as it was."""
    config = BrokerConfig()
    caller = Caller("c1", "127.0.0.1")

    def request(epoch: int, owned=None, names=("t",)) -> HeartbeatRequest:
        return HeartbeatRequest("g", "m1", epoch, None, None, 5000, names, None, None,
                                owned, True)

    async def run() -> tuple[int, int, int]:
        store = OffsetStore(str(tmp_path))
        coord = ConsumerGroupCoordinator(config, store, lambda: {"t": 4})
        first = coord.heartbeat(request(0), caller)
        assert first.error == errors.NONE and first.assignment == {"t": frozenset(range(4))}
        lines = (tmp_path / LOG_NAME).read_text().count("\n")
        for _ in range(5):
            steady = coord.heartbeat(request(first.member_epoch, first.assignment, None),
                                     caller)
            assert steady.error == errors.NONE and steady.assignment is None
        after = (tmp_path / LOG_NAME).read_text().count("\n")
        store.close()
        again = ConsumerGroupCoordinator(config, OffsetStore(str(tmp_path)),
                                         lambda: {"t": 4})
        back = again.heartbeat(request(first.member_epoch, first.assignment, None), caller)
        assert back.error == errors.NONE and back.member_epoch == first.member_epoch
        return lines, after, again.groups["g"].epoch

    lines, after, epoch = asyncio.run(run())
    assert after == lines  # five steady heartbeats: not one line
    assert epoch == 1


def test_max_groups_counts_classic_and_consumer_groups_together(tmp_path):
    with EmbeddedBroker(topics={TOPIC: 2}, log_path=tmp_path / "broker.log",
                        extra_args=["--max-groups", "2"]) as b, WireClient(b.bootstrap) as c:

        def simple_commit(group: str) -> int:  # makes a classic group (offsets only)
            return c.request(schemas.OFFSET_COMMIT, 8, {
                "group_id": group, "generation_id": -1, "member_id": "",
                "group_instance_id": None, "topics": [{"name": TOPIC, "partitions": [
                    {"partition_index": 0, "committed_offset": 1,
                     "committed_leader_epoch": -1, "committed_metadata": None}]}]}
            )["topics"][0]["partitions"][0]["error_code"]

        assert simple_commit("classic-1") == errors.NONE
        assert Member(c, "consumer-1").heartbeat()["error_code"] == errors.NONE
        assert Member(c, "consumer-2").heartbeat()["error_code"] == (
            errors.GROUP_MAX_SIZE_REACHED)
        assert simple_commit("classic-2") == errors.GROUP_MAX_SIZE_REACHED


def test_subscriptions_count_against_the_group_metadata_caps(tmp_path):
    """A KIP-848 member's subscription (each name at what it holds in memory) counts
    against --group-max-metadata-bytes and, with classic groups' metadata, against
    --groups-max-metadata-bytes; refused with the setting named, and counted off again
    when the member leaves."""
    from appliance.broker.groups.consumer_groups import NAME_OVERHEAD

    names = [f"topic-{i:04d}" for i in range(20)]  # 10 characters each
    one = len(names) * (10 + NAME_OVERHEAD)  # 1,480 bytes
    args = ["--group-max-metadata-bytes", str(2 * one + 100),
            "--groups-max-metadata-bytes", str(4 * one + 100),
            "--group-initial-rebalance-delay-ms", "0"]
    with EmbeddedBroker(topics={TOPIC: 1}, log_path=tmp_path / "broker.log",
                        extra_args=args) as b, WireClient(b.bootstrap) as c:
        a1, a2, a3 = (Member(c, "caps-a", topics=names) for _ in range(3))
        assert a1.heartbeat()["error_code"] == errors.NONE
        assert a2.heartbeat()["error_code"] == errors.NONE
        refused = a3.heartbeat()
        assert refused["error_code"] == errors.UNKNOWN_SERVER_ERROR
        assert "--group-max-metadata-bytes" in refused["error_message"]
        b1, b2 = (Member(c, "caps-b", topics=names) for _ in range(2))
        assert b1.heartbeat()["error_code"] == errors.NONE
        assert b2.heartbeat()["error_code"] == errors.NONE
        # four subscriptions held: a classic member's 200 bytes would pass the total
        classic = dict(join_body("caps-classic", session=10000), protocols=[
            {"name": "range", "metadata": b"m" * 200}])
        assert c.request(schemas.JOIN_GROUP, 5, classic)["error_code"] == (
            errors.UNKNOWN_SERVER_ERROR)
        assert a2.heartbeat(epoch=-1)["error_code"] == errors.NONE  # leaves: counted off
        assert a3.heartbeat()["error_code"] == errors.NONE
        log_text = (tmp_path / "broker.log").read_text()
        assert "--groups-max-metadata-bytes" in log_text
