"""ACLs on the wire, with raw requests: CreateAcls/DescribeAcls/DeleteAcls in every
served version (v0-1 classic, v2-3 flexible), SECURITY_DISABLED without an authorizer,
each API's denial answer, persistence across a restart, the offline CLI applied on SIGHUP,
a bad ACL file refused at start, and the denial metric and log event.

On a PLAINTEXT listener every connection is ``User:ANONYMOUS``, the principal these tests
grant to (or make a super user); the real clients with SASL users are
``test_acls_clients.py``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

import pytest

from appliance.broker import EmbeddedBroker
from appliance.broker.wire import errors, schemas
from appliance.broker.wire.client import WireClient
from appliance.process.logwatch import log_events

from support.wire_helpers import batch, fetch, metadata, produce

ANON = "User:ANONYMOUS"
TOPIC, GROUP, CLUSTER = 2, 3, 4
LITERAL, PREFIXED, MATCH, ANY = 3, 4, 2, 1
READ, WRITE, DESCRIBE, OP_ANY, ALL = 3, 4, 8, 1, 2
ALLOW, DENY, PERM_ANY = 3, 2, 1


def creation(name, op, principal=ANON, permission=ALLOW, rtype=TOPIC, pattern=LITERAL,
             host="*"):
    return {"resource_type": rtype, "resource_name": name, "resource_pattern_type": pattern,
            "principal": principal, "host": host, "operation": op,
            "permission_type": permission}


def acl_filter(name=None, rtype=1, pattern=ANY, principal=None, op=OP_ANY):
    return {"resource_type_filter": rtype, "resource_name_filter": name,
            "pattern_type_filter": pattern, "principal_filter": principal,
            "host_filter": None, "operation": op, "permission_type": PERM_ANY}


def described(c: WireClient, version: int, **kw) -> set[tuple]:
    resp = c.request(schemas.DESCRIBE_ACLS, version, acl_filter(**kw))
    assert resp["error_code"] == errors.NONE, resp
    return {(r["resource_type"], r["resource_name"], r["pattern_type"], a["principal"],
             a["operation"], a["permission_type"])
            for r in resp["resources"] for a in r["acls"]}


def _broker(tmp_path, name, *args, metrics=False):
    data = tmp_path / name
    data.mkdir(exist_ok=True)
    extra = ["--topics", "events:2,alerts:1", "--authorizer", "acl", *args]
    if metrics:
        extra += ["--metrics-port", "0"]
    return EmbeddedBroker(data_dir=data, extra_args=extra,
                          log_path=tmp_path / f"{name}.log")


@pytest.fixture
def admin_broker(tmp_path):
    """The authorizer on, the anonymous principal a super user (may do everything)."""
    b = _broker(tmp_path, "admin", "--super-users", ANON).start()
    yield b
    b.stop()


@pytest.fixture
def locked_broker(tmp_path):
    """The authorizer on and no ACL at all: the anonymous principal may do nothing."""
    b = _broker(tmp_path, "locked", metrics=True).start()
    yield b
    b.stop()


# -- the ACL APIs ---------------------------------------------------------------------------

@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_acl_apis_answer_security_disabled_without_an_authorizer(tmp_path, version):
    with EmbeddedBroker(topics={"events": 1}, log_path=tmp_path / "b.log") as b, \
            WireClient(b.bootstrap) as c:
        created = c.request(schemas.CREATE_ACLS, version,
                            {"creations": [creation("events", READ)]})
        assert [r["error_code"] for r in created["results"]] == [errors.SECURITY_DISABLED]
        assert "--authorizer acl" in created["results"][0]["error_message"]
        d = c.request(schemas.DESCRIBE_ACLS, version, acl_filter())
        assert d["error_code"] == errors.SECURITY_DISABLED
        deleted = c.request(schemas.DELETE_ACLS, version, {"filters": [acl_filter()]})
        assert [r["error_code"] for r in deleted["filter_results"]] == [
            errors.SECURITY_DISABLED]
        # and everything else is allowed, as before ACLs existed
        assert produce(c, "events", 0, batch([b"x"]))["error_code"] == errors.NONE


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_create_describe_delete_round_trip(admin_broker, version):
    alice = f"User:alice-v{version}"
    with WireClient(admin_broker.bootstrap) as c:
        made = [creation("events", READ, alice), creation("alerts", WRITE, alice),
                creation("events", READ, alice, permission=DENY, host="10.1.2.3")]
        if version >= 1:
            made.append(creation("logs.", WRITE, alice, pattern=PREFIXED))
        resp = c.request(schemas.CREATE_ACLS, version, {"creations": made})
        assert [r["error_code"] for r in resp["results"]] == [errors.NONE] * len(made)
        mine = described(c, version, principal=alice)
        expected = {(TOPIC, "events", LITERAL, alice, READ, ALLOW),
                    (TOPIC, "alerts", LITERAL, alice, WRITE, ALLOW),
                    (TOPIC, "events", LITERAL, alice, READ, DENY)}
        if version >= 1:
            expected.add((TOPIC, "logs.", PREFIXED, alice, WRITE, ALLOW))
            # MATCH: the bindings that apply to "logs.app"
            assert described(c, version, name="logs.app", rtype=TOPIC, pattern=MATCH,
                             principal=alice) == {(TOPIC, "logs.", PREFIXED, alice, WRITE,
                                                   ALLOW)}
        assert mine == expected
        resp = c.request(schemas.DELETE_ACLS, version, {"filters": [
            acl_filter("events", TOPIC, LITERAL if version == 0 else ANY, alice),
            acl_filter("nothing", TOPIC, LITERAL, alice)]})
        first, second = resp["filter_results"]
        assert first["error_code"] == errors.NONE
        assert {(m["resource_name"], m["permission_type"]) for m in first["matching_acls"]} \
            == {("events", ALLOW), ("events", DENY)}
        assert second["error_code"] == errors.NONE and second["matching_acls"] == []
        assert {row[1] for row in described(c, version, principal=alice)} == (
            {"alerts", "logs."} if version >= 1 else {"alerts"})


def test_filters_are_matched_as_given_as_kafka_reads_them(admin_broker):
    """A filter is not a binding: a principal of ``*`` is no error (it matches bindings
    whose principal is ``*``: none, all of them being TYPE:NAME), ``User:*`` matches the
    wildcard bindings, and no principal matches every one."""
    with WireClient(admin_broker.bootstrap) as c:
        resp = c.request(schemas.CREATE_ACLS, 3, {"creations": [
            creation("star-topic", READ, "User:*"), creation("star-topic", READ)]})
        assert [r["error_code"] for r in resp["results"]] == [errors.NONE, errors.NONE]
        assert described(c, 3, name="star-topic", principal="*") == set()
        assert described(c, 3, name="star-topic", principal="User:*") == {
            (TOPIC, "star-topic", LITERAL, "User:*", READ, ALLOW)}
        assert {row[3] for row in described(c, 3, name="star-topic")} == {"User:*", ANON}


def test_a_bad_creation_is_refused_with_its_field_and_the_good_ones_kept(admin_broker):
    with WireClient(admin_broker.bootstrap) as c:
        resp = c.request(schemas.CREATE_ACLS, 3, {"creations": [
            creation("events", READ, "alice"),  # no principal type
            creation("events", 99),
            creation("events", READ, "User:carol", host="not-an-ip"),
            creation("events", READ, "User:carol")]})
        codes = [r["error_code"] for r in resp["results"]]
        assert codes == [errors.INVALID_REQUEST] * 3 + [errors.NONE]
        messages = [r["error_message"] for r in resp["results"][:3]]
        assert [m.split(":")[0] for m in messages] == ["principal", "operation", "host"]
        assert described(c, 3, principal="User:carol") == {
            (TOPIC, "events", LITERAL, "User:carol", READ, ALLOW)}
        # a filter is matched as given, as Kafka reads it: no such principal, no match
        none = c.request(schemas.DESCRIBE_ACLS, 3, acl_filter(principal="nobody"))
        assert (none["error_code"], none["resources"]) == (errors.NONE, [])


def test_acls_survive_a_restart_and_a_bad_file_stops_the_start(tmp_path):
    b = _broker(tmp_path, "durable", "--super-users", ANON).start()
    try:
        with WireClient(b.bootstrap) as c:
            c.request(schemas.CREATE_ACLS, 2, {"creations": [
                creation("g-", READ, "User:dave", rtype=GROUP, pattern=PREFIXED)]})
        b.kill()  # kill -9: the answer came after the file was durable
        b.start()
        with WireClient(b.bootstrap) as c:
            assert described(c, 2, principal="User:dave") == {
                (GROUP, "g-", PREFIXED, "User:dave", READ, ALLOW)}
    finally:
        b.stop()
    path = tmp_path / "durable" / "acls.json"
    doc = json.loads(path.read_text())
    doc["acls"][0]["operation"] = "REED"
    path.write_text(json.dumps(doc))
    proc = subprocess.run([sys.executable, "-m", "appliance", "broker", "--port", "0",
                           "--data-dir", str(tmp_path / "durable"), "--authorizer", "acl"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    last = proc.stderr.strip().splitlines()[-1]
    assert str(path) in last and "acls[0].operation" in last and "REED" in last


# -- enforcement ----------------------------------------------------------------------------

def _topic_errors(c: WireClient, topics) -> dict:
    """topic -> the error code its Metadata entry carries."""
    meta = metadata(c, topics, include_topic_authorized_operations=False)
    return {t["name"]: t["error_code"] for t in meta["topics"]}


def _join_error(c: WireClient, group: str) -> int:
    return c.request(schemas.JOIN_GROUP, 5, {
        "group_id": group, "session_timeout_ms": 10000, "rebalance_timeout_ms": 3000,
        "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b""}], "reason": None})["error_code"]


def _delete_topic_error(c: WireClient, topic: str) -> int:
    return c.request(schemas.DELETE_TOPICS, 4, {"topic_names": [topic], "timeout_ms": 5000}
                     )["responses"][0]["error_code"]


def _acl_cli(data_dir, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "appliance", "broker-user", "acl", *args,
                           "--data-dir", str(data_dir)],
                          capture_output=True, text=True, timeout=60)


def _sighup_and_wait(b: EmbeddedBroker, count: int) -> None:
    before = sum(1 for e in log_events(b.log_path) if e.get("event") == "broker.acls_reloaded")
    os.kill(b.proc.pid, signal.SIGHUP)
    for _ in range(100):  # bounded: 10 s
        reloads = [e for e in log_events(b.log_path)
                   if e.get("event") == "broker.acls_reloaded"]
        if len(reloads) > before:
            assert reloads[-1]["acls"] == count
            return
        time.sleep(0.1)
    raise AssertionError("the broker did not log broker.acls_reloaded after SIGHUP")


def test_denied_then_allowed_through_the_offline_cli_and_sighup(locked_broker):
    b = locked_broker
    data = b.data_dir
    with WireClient(b.bootstrap) as c:
        # deny by default, with each API's error
        assert produce(c, "events", 0, batch([b"x"]))["error_code"] == \
            errors.TOPIC_AUTHORIZATION_FAILED
        assert fetch(c, "events", 0, 0)["error_code"] == errors.TOPIC_AUTHORIZATION_FAILED
        assert _topic_errors(c, ["events"]) == {"events": errors.TOPIC_AUTHORIZATION_FAILED}
        assert _topic_errors(c, None) == {}  # all topics: the denied ones left out
        assert _join_error(c, "g1") == errors.GROUP_AUTHORIZATION_FAILED
        assert _delete_topic_error(c, "alerts") == errors.TOPIC_AUTHORIZATION_FAILED
        find = c.request(schemas.FIND_COORDINATOR, 3, {"key": "g1", "key_type": 0})
        assert find["error_code"] == errors.GROUP_AUTHORIZATION_FAILED
        init = c.request(schemas.INIT_PRODUCER_ID, 2, {
            "transactional_id": None, "transaction_timeout_ms": 60000})
        assert init["error_code"] == errors.CLUSTER_AUTHORIZATION_FAILED
        created = c.request(schemas.CREATE_ACLS, 3, {"creations": [creation("events", READ)]})
        assert created["results"][0]["error_code"] == errors.CLUSTER_AUTHORIZATION_FAILED
        assert c.request(schemas.DESCRIBE_ACLS, 3, acl_filter())["error_code"] == \
            errors.CLUSTER_AUTHORIZATION_FAILED

        # grant with the offline CLI; the broker applies it on SIGHUP
        for args in (["--allow-principal", ANON, "--operation", "WRITE", "--topic", "events"],
                     ["--allow-principal", ANON, "--operation", "READ", "--topic", "ev",
                      "--resource-pattern-type", "prefixed"],
                     ["--allow-principal", ANON, "--operation", "READ", "--group", "g1"],
                     ["--allow-principal", ANON, "--operation", "DELETE", "--topic",
                      "alerts"]):
            done = _acl_cli(data, "add", *args)
            assert done.returncode == 0, done.stderr
            assert "1 added, 0 already there" in done.stderr
        again = _acl_cli(data, "add", "--allow-principal", ANON, "--operation", "WRITE",
                         "--topic", "events")  # what configuration management repeats
        assert "0 added, 1 already there" in again.stderr, again.stderr
        assert produce(c, "events", 0, batch([b"x"]))["error_code"] == \
            errors.TOPIC_AUTHORIZATION_FAILED  # not yet applied
        _sighup_and_wait(b, 4)
        written = produce(c, "events", 0, batch([b"x"]))
        assert written["error_code"] == errors.NONE
        assert fetch(c, "events", 0, written["base_offset"])["error_code"] == errors.NONE
        assert _topic_errors(c, None) == {"events": errors.NONE, "alerts": errors.NONE}
        assert _join_error(c, "g1") in (errors.MEMBER_ID_REQUIRED, errors.NONE)
        assert _join_error(c, "g2") == errors.GROUP_AUTHORIZATION_FAILED
        assert c.request(schemas.INIT_PRODUCER_ID, 2, {
            "transactional_id": None, "transaction_timeout_ms": 60000})["error_code"] == \
            errors.NONE  # WRITE on a topic suffices (KIP-679)
        assert _delete_topic_error(c, "alerts") == errors.NONE

        # a DENY wins over the prefixed ALLOW
        assert _acl_cli(data, "add", "--deny-principal", ANON, "--operation", "READ",
                        "--topic", "events").returncode == 0
        _sighup_and_wait(b, 5)
        assert fetch(c, "events", 0, 0)["error_code"] == errors.TOPIC_AUTHORIZATION_FAILED
        assert produce(c, "events", 0, batch([b"y"]))["error_code"] == errors.NONE

        # a broken file on SIGHUP changes nothing
        with open(os.path.join(data, "acls.json"), "a") as fh:
            fh.write("garbage")
        os.kill(b.proc.pid, signal.SIGHUP)
        for _ in range(100):
            if any(e.get("event") == "broker.acls_reload_failed"
                   for e in log_events(b.log_path)):
                break
            time.sleep(0.1)
        failed = [e for e in log_events(b.log_path)
                  if e.get("event") == "broker.acls_reload_failed"]
        assert failed and "acls.json" in failed[-1]["error"]
        assert produce(c, "events", 0, batch([b"z"]))["error_code"] == errors.NONE

    denied = [e for e in log_events(b.log_path)
              if e.get("event") == "broker.authorization_denied"]
    assert {"principal": ANON, "api": "Produce", "operation": "WRITE",
            "resource_type": "TOPIC", "resource_name": "events"}.items() <= denied[0].items()
    page = urllib.request.build_opener(urllib.request.ProxyHandler({})).open(
        b.metrics_url, timeout=5).read().decode()
    assert 'broker_authorization_denials_total{api="Produce",resource_type="TOPIC"} 2.0' \
        in page
    assert 'broker_authorization_denials_total{api="JoinGroup",resource_type="GROUP"} 2.0' \
        in page


def test_the_cli_refuses_bad_input_with_one_line(tmp_path):
    done = _acl_cli(tmp_path, "add", "--allow-principal", "alice", "--operation", "READ",
                    "--topic", "t")
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "principal" in done.stderr and "User:alice" in done.stderr
    done = _acl_cli(tmp_path / "missing", "list")
    assert done.returncode == 2 and "--data-dir" in done.stderr
    (tmp_path / "acls.json").write_text('{"acls": [{"resource_type": "TOPIC"}]}')
    done = _acl_cli(tmp_path, "list")
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert f"{tmp_path / 'acls.json'}: acls[0].resource_name: missing" in done.stderr


def test_the_docs_table_of_what_each_api_needs_is_the_enforced_one():
    from pathlib import Path

    from appliance.broker.acl import needs

    doc = (Path(__file__).resolve().parents[2] / "docs" / "broker.md").read_text()
    table = doc.split("| API | resource | operation | denied: | why |", 1)[1].split("\n\n")[0]
    documented = [tuple(c.strip() for c in row.strip("|").split("|")[:4])
                  for row in table.strip().splitlines()[1:]]
    names = {v: k for k, v in vars(errors).items() if k.isupper() and isinstance(v, int)}
    assert documented == [(n.api.name, n.resource_type.name, n.operation.name,
                           f"`{names[n.error]}`") for n in needs.TABLE]


@pytest.mark.parametrize(("flags", "named"), [
    (["--super-users", "admin"], "--super-users"),
    (["--authorizer", "ranger"], "--authorizer"),
])
def test_bad_authorization_flags_exit_2_naming_the_flag(flags, named):
    proc = subprocess.run([sys.executable, "-m", "appliance", "broker", "--port", "0", *flags],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert named in proc.stderr.strip().splitlines()[-1]


def test_each_api_is_allowed_on_what_is_granted_and_denied_elsewhere(tmp_path):
    data = tmp_path / "each"
    data.mkdir()
    for args in (["--operation", "READ", "--operation", "ALTER", "--operation", "DELETE",
                  "--operation", "ALTER_CONFIGS", "--topic", "events"],
                 ["--operation", "CREATE", "--topic", "new-", "--resource-pattern-type",
                  "prefixed"],
                 ["--operation", "READ", "--group", "g1", "--group", "g2"]):
        assert _acl_cli(data, "add", "--allow-principal", ANON, *args).returncode == 0
    assert _acl_cli(data, "add", "--deny-principal", ANON, "--operation", "DESCRIBE",
                    "--group", "g2").returncode == 0
    b = EmbeddedBroker(data_dir=data, log_path=tmp_path / "each.log", extra_args=[
        "--topics", "events:2,alerts:1", "--authorizer", "acl"]).start()
    try:
        with WireClient(b.bootstrap) as c:
            _check_topic_apis(c)
            _check_group_apis(c)
    finally:
        b.stop()


def _check_topic_apis(c: WireClient) -> None:
    created = c.request(schemas.CREATE_TOPICS, 5, {"topics": [
        {"name": n, "num_partitions": 1, "replication_factor": 1, "assignments": [],
         "configs": []} for n in ("new-one", "other")], "timeout_ms": 5000,
        "validate_only": False})
    assert {t["name"]: t["error_code"] for t in created["topics"]} == {
        "new-one": errors.NONE, "other": errors.TOPIC_AUTHORIZATION_FAILED}
    grown = c.request(schemas.CREATE_PARTITIONS, 2, {"topics": [
        {"name": n, "count": 3, "assignments": None} for n in ("events", "alerts")],
        "timeout_ms": 5000, "validate_only": True})
    assert {r["name"]: r["error_code"] for r in grown["results"]} == {
        "events": errors.NONE, "alerts": errors.TOPIC_AUTHORIZATION_FAILED}
    offsets = c.request(schemas.LIST_OFFSETS, 5, {"replica_id": -1, "isolation_level": 0,
                                                  "topics": [{"name": n, "partitions": [{
                                                      "partition_index": 0,
                                                      "current_leader_epoch": -1,
                                                      "timestamp": -1}]}
                                                      for n in ("events", "alerts")]})
    assert {t["name"]: t["partitions"][0]["error_code"] for t in offsets["topics"]} == {
        "events": errors.NONE, "alerts": errors.TOPIC_AUTHORIZATION_FAILED}
    trimmed = c.request(schemas.DELETE_RECORDS, 2, {"topics": [
        {"name": n, "partitions": [{"partition_index": 0, "offset": 0}]}
        for n in ("events", "alerts")], "timeout_ms": 5000})
    assert {t["name"]: t["partitions"][0]["error_code"] for t in trimmed["topics"]} == {
        "events": errors.NONE, "alerts": errors.TOPIC_AUTHORIZATION_FAILED}
    described = c.request(schemas.DESCRIBE_CONFIGS, 4, {"resources": [
        {"resource_type": rt, "resource_name": n, "configuration_keys": ["retention.ms"]}
        for rt, n in ((2, "events"), (2, "alerts"), (4, "0"))],
        "include_synonyms": False, "include_documentation": False})
    assert [r["error_code"] for r in described["results"]] == [
        errors.NONE, errors.TOPIC_AUTHORIZATION_FAILED, errors.CLUSTER_AUTHORIZATION_FAILED]
    altered = c.request(schemas.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [
        {"resource_type": 2, "resource_name": n, "configs": [
            {"name": "retention.ms", "config_operation": 0, "value": "3600000"}]}
        for n in ("events", "alerts")], "validate_only": True})
    assert [r["error_code"] for r in altered["responses"]] == [
        errors.NONE, errors.TOPIC_AUTHORIZATION_FAILED]
    meta = c.request(schemas.METADATA, 10, {
        "topics": [{"name": "events", "topic_id": None}], "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": True})["topics"][0]
    bits = meta["topic_authorized_operations"]
    assert {op for op in range(32) if bits >> op & 1} == {3, 6, 7, 8, 10, 11}  # READ,
    # DELETE, ALTER, DESCRIBE (implied), DESCRIBE_CONFIGS (implied), ALTER_CONFIGS


def _check_group_apis(c: WireClient) -> None:
    def commit(group: str, topic: str) -> int:
        return c.request(schemas.OFFSET_COMMIT, 8, {
            "group_id": group, "generation_id": -1, "member_id": "", "group_instance_id": None,
            "topics": [{"name": topic, "partitions": [{
                "partition_index": 0, "committed_offset": 0, "committed_leader_epoch": -1,
                "committed_metadata": None}]}]})["topics"][0]["partitions"][0]["error_code"]

    assert commit("g1", "events") == errors.NONE
    assert commit("g2", "events") == errors.NONE  # READ on g2; only DESCRIBE is denied
    assert commit("g1", "alerts") == errors.TOPIC_AUTHORIZATION_FAILED
    assert commit("g3", "events") == errors.GROUP_AUTHORIZATION_FAILED
    fetched = c.request(schemas.OFFSET_FETCH, 8, {"groups": [
        {"group_id": g, "topics": None} for g in ("g1", "g2")], "require_stable": False})
    assert [(g["group_id"], g["error_code"]) for g in fetched["groups"]] == [
        ("g1", errors.NONE), ("g2", errors.GROUP_AUTHORIZATION_FAILED)]
    assert [t["name"] for t in fetched["groups"][0]["topics"]] == ["events"]
    listed = c.request(schemas.LIST_GROUPS, 4, {"states_filter": []})
    assert [g["group_id"] for g in listed["groups"]] == ["g1"]  # g2: DESCRIBE denied
    groups = c.request(schemas.DESCRIBE_GROUPS, 5, {"groups": ["g1", "g2"],
                                                    "include_authorized_operations": True})
    assert [g["error_code"] for g in groups["groups"]] == [
        errors.NONE, errors.GROUP_AUTHORIZATION_FAILED]
    assert groups["groups"][0]["authorized_operations"] == (1 << 3) | (1 << 8)  # READ, DESCRIBE
    deleted = c.request(schemas.DELETE_GROUPS, 2, {"groups_names": ["g1"]})
    assert deleted["results"][0]["error_code"] == errors.GROUP_AUTHORIZATION_FAILED
