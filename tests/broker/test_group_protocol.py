"""The group coordinator over raw requests: Kafka's error codes and state transitions.

The real clients' tests (test_groups_*.py) show that groups work; these pin down the
answers clients rely on when something is off: MEMBER_ID_REQUIRED, UNKNOWN_MEMBER_ID,
ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS, FENCED_INSTANCE_ID and friends. A JoinGroup (or
SyncGroup) answer waits for the rebalance, so several members are driven from several
connections: send now, read later.
"""

from __future__ import annotations

import time

import pytest

from appliance.broker import EmbeddedBroker
from appliance.broker.groups.consumer_protocol import SUBSCRIPTION
from appliance.broker.wire import errors, schemas
from appliance.broker.wire.client import WireClient
from appliance.broker.wire.codec import Writer
from appliance.broker.wire.codegen import encode_struct

SESSION_MS = 1500  # the fixture broker allows sessions from 500 ms


@pytest.fixture(scope="module")
def gbroker(tmp_path_factory):
    """Fast groups: no initial rebalance delay, short sessions allowed."""
    b = EmbeddedBroker(topics={"gp": 4, "gp-other": 1},
                       extra_args=["--group-initial-rebalance-delay-ms", "0",
                                   "--group-min-session-timeout-ms", "500"],
                       log_path=tmp_path_factory.mktemp("gp") / "broker.log")
    b.start()
    yield b
    b.stop()


def subscription(*topics: str) -> bytes:
    w = Writer()
    w.int16(0)
    encode_struct(SUBSCRIPTION, w, 0, False, {"topics": list(topics), "user_data": None})
    return w.getvalue()


def join_body(group: str, member: str = "", instance: str | None = None,
              session: int = SESSION_MS, ptype: str = "consumer",
              protocols=None) -> dict:
    if protocols is None:
        protocols = [("range", subscription("gp"))]
    return {"group_id": group, "session_timeout_ms": session, "rebalance_timeout_ms": 3000,
            "member_id": member, "group_instance_id": instance, "protocol_type": ptype,
            "protocols": [{"name": n, "metadata": m} for n, m in protocols], "reason": None}


class Sent:
    """A request sent now whose answer is read later (it may wait for a rebalance)."""

    def __init__(self, c: WireClient, schema, version: int, body: dict) -> None:
        self.c, self.schema, self.version = c, schema, version
        c.send_raw(c.encode(schema, version, body))

    def answer(self) -> dict:
        return self.c.decode_response(self.schema, self.version, self.c.recv_frame())[1]


def join(c: WireClient, group: str, version: int = 5, **kw) -> dict:
    """A full join of a new member (with the MEMBER_ID_REQUIRED round trip on v4+)."""
    resp = c.request(schemas.JOIN_GROUP, version, join_body(group, **kw))
    if resp["error_code"] == errors.MEMBER_ID_REQUIRED:
        resp = c.request(schemas.JOIN_GROUP, version, join_body(
            group, member=resp["member_id"], **kw))
    return resp


def sync(c: WireClient, group: str, generation: int, member: str, assignments=(),
         version: int = 3, instance: str | None = None) -> dict:
    return c.request(schemas.SYNC_GROUP, version, {
        "group_id": group, "generation_id": generation, "member_id": member,
        "group_instance_id": instance, "protocol_type": "consumer", "protocol_name": "range",
        "assignments": [{"member_id": m, "assignment": a} for m, a in assignments]})


def heartbeat(c: WireClient, group: str, generation: int, member: str,
              instance: str | None = None) -> int:
    return c.request(schemas.HEARTBEAT, 3, {
        "group_id": group, "generation_id": generation, "member_id": member,
        "group_instance_id": instance})["error_code"]


def describe(c: WireClient, group: str) -> dict:
    return c.request(schemas.DESCRIBE_GROUPS, 5, {
        "groups": [group], "include_authorized_operations": True})["groups"][0]


def commit(c: WireClient, group: str, generation: int, member: str, offset: int,
           topic: str = "gp") -> int:
    resp = c.request(schemas.OFFSET_COMMIT, 8, {
        "group_id": group, "generation_id": generation, "member_id": member,
        "group_instance_id": None, "topics": [{"name": topic, "partitions": [
            {"partition_index": 0, "committed_offset": offset, "committed_leader_epoch": -1,
             "committed_metadata": None}]}]})
    return resp["topics"][0]["partitions"][0]["error_code"]


def unique(name: str) -> str:
    return f"{name}-{time.monotonic_ns()}"


def test_a_first_member_is_told_its_id_then_leads_generation_1(gbroker):
    group = unique("g1")
    with WireClient(gbroker.bootstrap, client_id="raw-client") as c:
        first = c.request(schemas.JOIN_GROUP, 5, join_body(group))
        assert first["error_code"] == errors.MEMBER_ID_REQUIRED
        assert first["member_id"].startswith("raw-client-")
        joined = c.request(schemas.JOIN_GROUP, 5, join_body(group, member=first["member_id"]))
        assert joined["error_code"] == 0
        assert (joined["generation_id"], joined["leader"], joined["member_id"]) == (
            1, first["member_id"], first["member_id"])
        assert joined["protocol_name"] == "range"
        assert [m["member_id"] for m in joined["members"]] == [first["member_id"]]
        assert bytes(joined["members"][0]["metadata"]) == subscription("gp")
        assert describe(c, group)["group_state"] == "CompletingRebalance"
        synced = sync(c, group, 1, first["member_id"], [(first["member_id"], b"plan")])
        assert (synced["error_code"], bytes(synced["assignment"])) == (0, b"plan")
        d = describe(c, group)
        assert (d["group_state"], d["protocol_type"], d["protocol_data"]) == (
            "Stable", "consumer", "range")
        (m,) = d["members"]
        assert (m["client_id"], m["client_host"], bytes(m["member_assignment"])) == (
            "raw-client", "127.0.0.1", b"plan")
        assert d["authorized_operations"] > 0
        assert heartbeat(c, group, 1, first["member_id"]) == 0


def test_join_v0_to_v3_gets_a_member_id_at_once_and_v7_null_protocol_on_error(gbroker):
    group = unique("g-old")
    with WireClient(gbroker.bootstrap) as c:
        resp = c.request(schemas.JOIN_GROUP, 0, join_body(group))
        assert (resp["error_code"], resp["generation_id"]) == (0, 1)
        assert resp["protocol_name"] == "range"
        bad = c.request(schemas.JOIN_GROUP, 7, join_body(group, ptype="connect"))
        assert bad["error_code"] == errors.INCONSISTENT_GROUP_PROTOCOL
        assert bad["protocol_name"] is None and bad["protocol_type"] is None


@pytest.mark.parametrize("body,code", [
    ({"session": 100}, errors.INVALID_SESSION_TIMEOUT),
    ({"session": 3_600_000}, errors.INVALID_SESSION_TIMEOUT),
    ({"member": "nobody"}, errors.UNKNOWN_MEMBER_ID),
    ({"protocols": []}, errors.INCONSISTENT_GROUP_PROTOCOL),
    ({"ptype": ""}, errors.INCONSISTENT_GROUP_PROTOCOL),
])
def test_join_refusals(gbroker, body, code):
    with WireClient(gbroker.bootstrap) as c:
        resp = c.request(schemas.JOIN_GROUP, 6, join_body(unique("g-bad"), **body))
        assert resp["error_code"] == code
        assert c.request(schemas.JOIN_GROUP, 6, join_body(""))["error_code"] == \
            errors.INVALID_GROUP_ID


def test_a_second_member_rebalances_the_group_and_gets_the_leaders_assignment(gbroker):
    group = unique("g2")
    with WireClient(gbroker.bootstrap) as a, WireClient(gbroker.bootstrap) as b:
        ja = join(a, group)
        assert sync(a, group, 1, ja["member_id"], [(ja["member_id"], b"all")])["error_code"] == 0
        # b joins: a learns of the rebalance from its heartbeat, and rejoins
        first = b.request(schemas.JOIN_GROUP, 5, join_body(group))
        jb = Sent(b, schemas.JOIN_GROUP, 5, join_body(group, member=first["member_id"]))
        assert heartbeat(a, group, 1, ja["member_id"]) == errors.REBALANCE_IN_PROGRESS
        assert sync(a, group, 1, ja["member_id"])["error_code"] == errors.REBALANCE_IN_PROGRESS
        # a commit of the old generation is still allowed while preparing (Kafka's rule)
        assert commit(a, group, 1, ja["member_id"], 3) == 0
        ra = a.request(schemas.JOIN_GROUP, 5, join_body(group, member=ja["member_id"]))
        rb = jb.answer()
        assert ra["generation_id"] == rb["generation_id"] == 2
        assert ra["leader"] == rb["leader"] == ja["member_id"]  # the old leader stays
        assert {m["member_id"] for m in ra["members"]} == {ja["member_id"], rb["member_id"]}
        assert rb["members"] == []  # only the leader sees the members
        # b's SyncGroup waits for the leader's; then both get their share
        sb = Sent(b, schemas.SYNC_GROUP, 3, {
            "group_id": group, "generation_id": 2, "member_id": rb["member_id"],
            "group_instance_id": None, "assignments": []})
        assert commit(a, group, 2, rb["member_id"], 4) == errors.REBALANCE_IN_PROGRESS
        sa = sync(a, group, 2, ja["member_id"], [(ja["member_id"], b"half-a"),
                                                 (rb["member_id"], b"half-b")])
        assert bytes(sa["assignment"]) == b"half-a"
        assert bytes(sb.answer()["assignment"]) == b"half-b"
        # the old generation is fenced now
        assert heartbeat(a, group, 1, ja["member_id"]) == errors.ILLEGAL_GENERATION
        assert commit(a, group, 1, ja["member_id"], 5) == errors.ILLEGAL_GENERATION
        assert commit(a, group, 2, ja["member_id"], 6) == 0
        assert commit(a, group, -1, "", 7) == errors.UNKNOWN_MEMBER_ID  # not a member
        assert heartbeat(a, group, 2, "stranger") == errors.UNKNOWN_MEMBER_ID


def test_a_member_that_stops_heartbeating_is_removed_after_its_session(gbroker):
    group = unique("g-expire")
    with WireClient(gbroker.bootstrap) as a, WireClient(gbroker.bootstrap) as b:
        ja = join(a, group)
        sync(a, group, 1, ja["member_id"], [(ja["member_id"], b"x")])
        first = b.request(schemas.JOIN_GROUP, 5, join_body(group))
        jb = Sent(b, schemas.JOIN_GROUP, 5, join_body(group, member=first["member_id"]))
        # a never rejoins and never heartbeats again: b's join completes without it
        started = time.monotonic()
        rb = jb.answer()
        waited = time.monotonic() - started
        assert rb["error_code"] == 0 and rb["leader"] == rb["member_id"]
        assert [m["member_id"] for m in rb["members"]] == [rb["member_id"]]
        assert waited >= SESSION_MS / 1000 * 0.8  # a was kept until its session ran out
        assert heartbeat(a, group, 1, ja["member_id"]) == errors.UNKNOWN_MEMBER_ID


def test_leave_group_v0_and_batched_v3_and_the_group_empties(gbroker):
    group = unique("g-leave")
    with WireClient(gbroker.bootstrap) as c:
        j = join(c, group, instance="inst-1")  # static: no MEMBER_ID_REQUIRED round trip
        assert j["error_code"] == 0 and j["generation_id"] == 1
        resp = c.request(schemas.LEAVE_GROUP, 3, {"group_id": group, "members": [
            {"member_id": "", "group_instance_id": "inst-1"},
            {"member_id": "ghost", "group_instance_id": None}]})
        assert [m["error_code"] for m in resp["members"]] == [0, errors.UNKNOWN_MEMBER_ID]
        assert describe(c, group)["group_state"] in ("Empty", "Dead")
        resp = c.request(schemas.LEAVE_GROUP, 0, {"group_id": group, "member_id": "ghost"})
        assert resp["error_code"] == errors.UNKNOWN_MEMBER_ID


def test_static_member_restart_keeps_its_assignment_without_a_rebalance(gbroker):
    group = unique("g-static")
    with WireClient(gbroker.bootstrap) as a, WireClient(gbroker.bootstrap) as b:
        ja = join(a, group, instance="a")
        jb = Sent(b, schemas.JOIN_GROUP, 5, join_body(group, instance="b"))
        ra = a.request(schemas.JOIN_GROUP, 5, join_body(group, member=ja["member_id"],
                                                        instance="a"))
        rb = jb.answer()
        gen = ra["generation_id"]
        sb = Sent(b, schemas.SYNC_GROUP, 3, {
            "group_id": group, "generation_id": gen, "member_id": rb["member_id"],
            "group_instance_id": "b", "assignments": []})
        sync(a, group, gen, ra["member_id"], [(ra["member_id"], b"for-a"),
                                              (rb["member_id"], b"for-b")], instance="a")
        assert bytes(sb.answer()["assignment"]) == b"for-b"
        # b "restarts": same instance id, no member id. No rebalance, same generation.
        with WireClient(gbroker.bootstrap) as b2:
            again = b2.request(schemas.JOIN_GROUP, 5, join_body(group, instance="b"))
            assert again["error_code"] == 0 and again["generation_id"] == gen
            assert again["member_id"] != rb["member_id"]
            got = sync(b2, group, gen, again["member_id"], instance="b")
            assert bytes(got["assignment"]) == b"for-b"
            assert heartbeat(a, group, gen, ra["member_id"], "a") == 0  # a saw nothing
            # the old incarnation is fenced
            assert heartbeat(b, group, gen, rb["member_id"], "b") == errors.FENCED_INSTANCE_ID
            assert describe(a, group)["group_state"] == "Stable"
            assert {m["group_instance_id"] for m in describe(a, group)["members"]} == {"a", "b"}


def test_new_partitions_of_a_subscribed_topic_rebalance_the_group(gbroker):
    topic, group = unique("grow"), unique("g-grow")
    gbroker.create_topics({topic: 1})
    with WireClient(gbroker.bootstrap) as c:
        j = join(c, group, protocols=[("range", subscription(topic))])
        sync(c, group, 1, j["member_id"], [(j["member_id"], b"p0")])
        other = unique("g-other")
        jo = join(c, other, protocols=[("range", subscription("gp-other"))])
        sync(c, other, 1, jo["member_id"], [(jo["member_id"], b"x")])
        grown = c.request(schemas.CREATE_PARTITIONS, 2, {
            "topics": [{"name": topic, "count": 3, "assignments": None}], "timeout_ms": 1000,
            "validate_only": False})
        assert grown["results"][0]["error_code"] == 0
        assert heartbeat(c, group, 1, j["member_id"]) == errors.REBALANCE_IN_PROGRESS
        assert heartbeat(c, other, 1, jo["member_id"]) == 0  # not subscribed: untouched


def test_list_describe_delete_groups_and_offset_delete(gbroker):
    active, idle = unique("g-active"), unique("g-idle")
    with WireClient(gbroker.bootstrap) as c:
        j = join(c, active)
        sync(c, active, 1, j["member_id"], [(j["member_id"], b"x")])
        assert commit(c, idle, -1, "", 11, topic="gp") == 0  # offsets only: Empty
        assert commit(c, idle, -1, "", 3, topic="gp-other") == 0
        listed = {g["group_id"]: g for g in c.request(schemas.LIST_GROUPS, 5, {
            "states_filter": [], "types_filter": []})["groups"]}
        assert listed[active]["group_state"] == "Stable"
        assert listed[active]["protocol_type"] == "consumer"
        assert listed[idle]["group_state"] == "Empty"
        assert {g["group_type"] for g in listed.values()} == {"classic"}
        stable = c.request(schemas.LIST_GROUPS, 4, {"states_filter": ["stable"]})["groups"]
        assert active in {g["group_id"] for g in stable} and idle not in {
            g["group_id"] for g in stable}
        assert c.request(schemas.LIST_GROUPS, 5, {"states_filter": [],
                                                  "types_filter": ["consumer"]})["groups"] == []
        assert describe(c, "no-such-group")["group_state"] == "Dead"

        # OffsetDelete: refused for a topic the active group reads, done for the idle group
        resp = c.request(schemas.OFFSET_DELETE, 0, {"group_id": active, "topics": [
            {"name": "gp", "partitions": [{"partition_index": 0}]}]})
        assert resp["topics"][0]["partitions"][0]["error_code"] == \
            errors.GROUP_SUBSCRIBED_TO_TOPIC
        resp = c.request(schemas.OFFSET_DELETE, 0, {"group_id": idle, "topics": [
            {"name": "gp", "partitions": [{"partition_index": 0}]}]})
        assert (resp["error_code"], resp["topics"][0]["partitions"][0]["error_code"]) == (0, 0)
        fetched = c.request(schemas.OFFSET_FETCH, 8, {"groups": [
            {"group_id": idle, "topics": None}, {"group_id": active, "topics": None}],
            "require_stable": False})["groups"]
        assert [(t["name"], p["committed_offset"]) for t in fetched[0]["topics"]
                for p in t["partitions"]] == [("gp-other", 3)]
        assert fetched[1]["topics"] == [] and fetched[1]["group_id"] == active
        resp = c.request(schemas.OFFSET_DELETE, 0, {"group_id": "no-such-group", "topics": []})
        assert resp["error_code"] == errors.GROUP_ID_NOT_FOUND

        deleted = c.request(schemas.DELETE_GROUPS, 2, {"groups_names": [
            active, idle, "no-such-group"]})["results"]
        assert [r["error_code"] for r in deleted] == [
            errors.NON_EMPTY_GROUP, 0, errors.GROUP_ID_NOT_FOUND]
        assert describe(c, idle)["group_state"] == "Dead"
        assert c.request(schemas.OFFSET_FETCH, 5, {"group_id": idle, "topics": None}
                         )["topics"] == []


def test_transaction_apis_are_advertised_and_check_the_producer(gbroker):
    """The transaction APIs on the wire: a transactional id's producer id and epoch; any
    other id or epoch refused before the transaction changes; offsets only after
    AddOffsetsToTxn; EndTxn of what was never begun refused."""
    with WireClient(gbroker.bootstrap) as c:
        versions = c.request(schemas.API_VERSIONS, 3, {"client_software_name": "t",
                                                       "client_software_version": "1"})
        advertised = {a["api_key"] for a in versions["api_keys"]}
        assert advertised >= {s.key for s in schemas.TRANSACTION_APIS}
        init = c.request(schemas.INIT_PRODUCER_ID, 2, {
            "transactional_id": "wire-tx", "transaction_timeout_ms": 60000})
        assert init["error_code"] == 0
        pid, epoch = init["producer_id"], init["producer_epoch"]
        assert c.request(schemas.INIT_PRODUCER_ID, 2, {
            "transactional_id": "wire-tx", "transaction_timeout_ms": 1 << 30}
        )["error_code"] == errors.INVALID_TRANSACTION_TIMEOUT

        def add(producer_id, producer_epoch, partitions=(0, 1)):
            resp = c.request(schemas.ADD_PARTITIONS_TO_TXN, 3, {
                "transactional_id": "wire-tx", "producer_id": producer_id,
                "producer_epoch": producer_epoch,
                "topics": [{"name": "gp", "partitions": list(partitions)}]})
            return [p["partition_error_code"] for p in resp["results"][0]["results"]]

        def end(producer_id, producer_epoch, committed=True):
            return c.request(schemas.END_TXN, 3, {
                "transactional_id": "wire-tx", "producer_id": producer_id,
                "producer_epoch": producer_epoch, "committed": committed})["error_code"]

        def txn_commit(offset):
            resp = c.request(schemas.TXN_OFFSET_COMMIT, 3, {
                "transactional_id": "wire-tx", "group_id": "wire-g", "producer_id": pid,
                "producer_epoch": epoch, "generation_id": -1, "member_id": "",
                "group_instance_id": None,
                "topics": [{"name": "gp", "partitions": [{
                    "partition_index": 0, "committed_offset": offset,
                    "committed_leader_epoch": -1, "committed_metadata": None}]}]})
            return resp["topics"][0]["partitions"][0]["error_code"]

        assert end(pid, epoch) == errors.INVALID_TXN_STATE  # nothing begun
        assert add(pid + 1, epoch) == [errors.INVALID_PRODUCER_ID_MAPPING] * 2
        assert add(pid, epoch + 1) == [errors.PRODUCER_FENCED] * 2
        assert add(pid, epoch, (0, 999)) == [errors.OPERATION_NOT_ATTEMPTED,
                                             errors.UNKNOWN_TOPIC_OR_PARTITION]
        assert add(pid, epoch) == [0, 0]
        assert txn_commit(5) == errors.INVALID_TXN_STATE  # the group was not added
        assert c.request(schemas.ADD_OFFSETS_TO_TXN, 3, {
            "transactional_id": "wire-tx", "producer_id": pid, "producer_epoch": epoch,
            "group_id": "wire-g"})["error_code"] == 0
        assert txn_commit(5) == 0
        fetched = c.request(schemas.OFFSET_FETCH, 5, {"group_id": "wire-g", "topics": None})
        assert fetched["topics"] == []  # pending until the transaction commits
        assert end(pid, epoch, committed=True) == 0
        assert end(pid, epoch, committed=True) == 0  # a retried EndTxn
        assert end(pid, epoch, committed=False) == errors.INVALID_TXN_STATE
        fetched = c.request(schemas.OFFSET_FETCH, 5, {"group_id": "wire-g", "topics": None})
        assert fetched["topics"][0]["partitions"][0]["committed_offset"] == 5
        again = c.request(schemas.INIT_PRODUCER_ID, 2, {
            "transactional_id": "wire-tx", "transaction_timeout_ms": 60000})
        assert (again["producer_id"], again["producer_epoch"]) == (pid, epoch + 1)
        assert add(pid, epoch) == [errors.PRODUCER_FENCED] * 2


@pytest.mark.parametrize("version", [5, 9])
def test_static_leader_restart_keeps_the_group_stable(gbroker, version):
    """A restarted static leader: on JoinGroup v9+ it gets the members and skip_assignment
    (KIP-814); before v9 it is told the old leader id, acts as a follower and takes its
    stored assignment. No rebalance either way."""
    group = unique(f"g-static-leader-v{version}")
    with WireClient(gbroker.bootstrap) as a, WireClient(gbroker.bootstrap) as b:
        ja = join(a, group, version=version, instance="lead")
        jb = Sent(b, schemas.JOIN_GROUP, version, join_body(group, instance="follow"))
        ra = a.request(schemas.JOIN_GROUP, version, join_body(group, member=ja["member_id"],
                                                              instance="lead"))
        rb = jb.answer()
        gen, leader = ra["generation_id"], ra["member_id"]
        assert ra["leader"] == leader
        sb = Sent(b, schemas.SYNC_GROUP, 3, {
            "group_id": group, "generation_id": gen, "member_id": rb["member_id"],
            "group_instance_id": "follow", "assignments": []})
        sync(a, group, gen, leader, [(leader, b"lead-part"), (rb["member_id"], b"f-part")],
             instance="lead")
        assert bytes(sb.answer()["assignment"]) == b"f-part"
        with WireClient(gbroker.bootstrap) as a2:
            again = a2.request(schemas.JOIN_GROUP, version, join_body(group, instance="lead"))
            assert (again["error_code"], again["generation_id"]) == (0, gen)
            if version >= 9:
                assert again["skip_assignment"] and again["leader"] == again["member_id"]
                assert len(again["members"]) == 2
            else:
                assert again["leader"] == leader != again["member_id"]  # "you follow"
                assert again["members"] == []
            got = sync(a2, group, gen, again["member_id"], instance="lead")
            assert bytes(got["assignment"]) == b"lead-part"
            assert heartbeat(b, group, gen, rb["member_id"], "follow") == 0
            assert describe(b, group)["group_state"] == "Stable"


def test_a_member_that_heartbeats_but_never_rejoins_is_dropped_at_the_rebalance_timeout(
        gbroker):
    group = unique("g-rebalance-timeout")
    with WireClient(gbroker.bootstrap) as a, WireClient(gbroker.bootstrap) as b:
        ja = join(a, group)  # rebalance timeout 3000 ms (join_body), session 1500 ms
        sync(a, group, 1, ja["member_id"], [(ja["member_id"], b"x")])
        first = b.request(schemas.JOIN_GROUP, 5, join_body(group))
        started = time.monotonic()
        jb = Sent(b, schemas.JOIN_GROUP, 5, join_body(group, member=first["member_id"]))
        codes = []
        while time.monotonic() - started < 10:  # a stays alive, but will not rejoin
            codes.append(heartbeat(a, group, 1, ja["member_id"]))
            if codes[-1] == errors.UNKNOWN_MEMBER_ID:
                break
            time.sleep(0.3)
        rb = jb.answer()
        assert set(codes[:-1]) == {errors.REBALANCE_IN_PROGRESS}
        assert codes[-1] == errors.UNKNOWN_MEMBER_ID
        assert time.monotonic() - started >= 3.0 * 0.8  # not before the rebalance timeout
        assert [m["member_id"] for m in rb["members"]] == [rb["member_id"]]
