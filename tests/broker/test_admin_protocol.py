"""Configs, DeleteRecords and DescribeCluster over raw requests: every version's layout,
Kafka's error codes, and configs that take effect at once (and after a restart)."""

from __future__ import annotations

import json
import time

import pytest

from appliance.broker import EmbeddedBroker
from appliance.broker.storage.topic_configs import ConfigSource
from appliance.broker.wire import errors, schemas
from appliance.broker.wire.client import WireClient

from support.wire_helpers import batch, fetch, list_offset, produce, record_values

TOPIC, BROKER = 2, 4  # resource types
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def describe(c: WireClient, rtype: int, name: str, version: int = 4, keys=None,
             synonyms: bool = True) -> dict:
    return c.request(schemas.DESCRIBE_CONFIGS, version, {
        "resources": [{"resource_type": rtype, "resource_name": name,
                       "configuration_keys": keys}],
        "include_synonyms": synonyms, "include_documentation": True})["results"][0]


def configs(c: WireClient, topic: str) -> dict[str, dict]:
    return {e["name"]: e for e in describe(c, TOPIC, topic)["configs"]}


def alter(c: WireClient, rtype: int, name: str, ops, validate_only: bool = False) -> dict:
    return c.request(schemas.INCREMENTAL_ALTER_CONFIGS, 1, {
        "resources": [{"resource_type": rtype, "resource_name": name, "configs": [
            {"name": n, "config_operation": op, "value": v} for n, op, v in ops]}],
        "validate_only": validate_only})["responses"][0]


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_describe_topic_configs_every_version(broker, new_topic, version):
    topic = new_topic(partitions=1, configs={"retention.ms": "3600000"})
    with WireClient(broker.bootstrap) as c:
        res = describe(c, TOPIC, topic, version)
        assert (res["error_code"], res["resource_name"]) == (0, topic)
        got = {e["name"]: e for e in res["configs"]}
        assert set(got) >= {"retention.ms", "retention.bytes", "max.message.bytes",
                            "segment.bytes", "cleanup.policy"}
        assert got["retention.ms"]["value"] == "3600000"
        assert got["retention.bytes"]["value"] == "-1"
        assert got["max.message.bytes"]["value"] == "1048588"
        assert got["cleanup.policy"]["value"] == "delete"
        assert got["min.insync.replicas"]["read_only"] and not got["cleanup.policy"]["read_only"]
        if version == 0:
            assert got["retention.ms"]["is_default"] is False
            assert got["retention.bytes"]["is_default"] is True
        else:
            assert got["retention.ms"]["config_source"] == ConfigSource.DYNAMIC_TOPIC_CONFIG
            assert got["retention.bytes"]["config_source"] == ConfigSource.DEFAULT_CONFIG
            assert [(s["name"], s["source"]) for s in got["retention.ms"]["synonyms"]] == [
                ("retention.ms", ConfigSource.DYNAMIC_TOPIC_CONFIG),
                ("log.retention.ms", ConfigSource.DEFAULT_CONFIG)]
        if version >= 3:
            assert got["retention.ms"]["config_type"] == 5  # LONG
            assert "deleted" in got["retention.ms"]["documentation"]
        only = describe(c, TOPIC, topic, version, keys=["max.message.bytes"])
        assert [e["name"] for e in only["configs"]] == ["max.message.bytes"]
        assert describe(c, TOPIC, "no-such-topic", version)["error_code"] == \
            errors.UNKNOWN_TOPIC_OR_PARTITION


def test_describe_broker_configs_read_only_with_flag_sources(tmp_path):
    with EmbeddedBroker(extra_args=["--retention-ms", "60000"],
                        log_path=tmp_path / "b.log") as b, WireClient(b.bootstrap) as c:
        for name in ("", "0"):
            res = describe(c, BROKER, name)
            got = {e["name"]: e for e in res["configs"]}
            assert res["error_code"] == 0
            assert got["log.retention.ms"]["value"] == "60000"
            assert got["log.retention.ms"]["config_source"] == ConfigSource.STATIC_BROKER_CONFIG
            assert got["message.max.bytes"]["config_source"] == ConfigSource.DEFAULT_CONFIG
            assert got["group.initial.rebalance.delay.ms"]["value"] == "3000"
            assert all(e["read_only"] for e in got.values())
        assert describe(c, BROKER, "7")["error_code"] == errors.INVALID_REQUEST
        assert describe(c, 8, "0")["error_code"] == errors.INVALID_REQUEST  # broker loggers
        # a topic without its own retention.ms takes the broker's, and says so
        b.create_topics({"flagged": 1})
        entry = configs(c, "flagged")["retention.ms"]
        assert (entry["value"], entry["config_source"]) == (
            "60000", ConfigSource.STATIC_BROKER_CONFIG)
        refused = alter(c, BROKER, "0", [("log.retention.ms", SET, "1")])
        assert refused["error_code"] == errors.INVALID_REQUEST
        assert "read-only" in refused["error_message"]


def test_incremental_alter_configs_take_effect_at_once(broker, new_topic):
    topic = new_topic(partitions=1)
    big = batch([b"x" * 600])
    with WireClient(broker.bootstrap) as c:
        assert produce(c, topic, 0, big)["error_code"] == 0
        assert alter(c, TOPIC, topic, [("max.message.bytes", SET, "300")])["error_code"] == 0
        assert produce(c, topic, 0, big)["error_code"] == errors.MESSAGE_TOO_LARGE
        assert configs(c, topic)["max.message.bytes"]["value"] == "300"
        assert alter(c, TOPIC, topic, [("max.message.bytes", DELETE, None)])["error_code"] == 0
        assert produce(c, topic, 0, big)["error_code"] == 0
        assert configs(c, topic)["max.message.bytes"]["config_source"] == \
            ConfigSource.DEFAULT_CONFIG
        # retention.ms shrinks: the next retention sweep (every second) drops old batches
        assert alter(c, TOPIC, topic, [("retention.ms", SET, "100")])["error_code"] == 0
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and list_offset(c, topic, 0, -2)["offset"] < 2:
            time.sleep(0.1)
        assert list_offset(c, topic, 0, -2)["offset"] == 2


@pytest.mark.parametrize("ops,code,words", [
    ([("cleanup.policy", APPEND, "shrink")], errors.INVALID_CONFIG,
     "String must be one of: compact, delete"),
    ([("cleanup.policy", SET, "compact,shrink")], errors.INVALID_CONFIG,
     "String must be one of: compact, delete"),
    ([("no.such.config", SET, "1")], errors.INVALID_CONFIG,
     "Unknown topic config name: no.such.config"),
    ([("retention.ms", SET, "soon")], errors.INVALID_CONFIG,
     "Invalid value soon for configuration retention.ms: Not a number of type LONG"),
    ([("retention.ms", SET, "-5")], errors.INVALID_CONFIG, "Value must be at least -1"),
    ([("retention.ms", APPEND, "5")], errors.INVALID_CONFIG, "list"),
    ([("retention.ms", 9, "5")], errors.INVALID_CONFIG, "operation"),
])
def test_bad_config_changes_are_refused_and_change_nothing(broker, new_topic, ops, code,
                                                           words):
    topic = new_topic(partitions=1, configs={"retention.ms": "5000"})
    with WireClient(broker.bootstrap) as c:
        res = alter(c, TOPIC, topic, [("retention.bytes", SET, "7000"), *ops])
        assert res["error_code"] == code and words in res["error_message"]
        got = configs(c, topic)
        assert (got["retention.ms"]["value"], got["retention.bytes"]["value"]) == (
            "5000", "-1")


def test_fixed_configs_accept_their_value_and_validate_only_changes_nothing(broker,
                                                                           new_topic):
    topic = new_topic(partitions=1)
    with WireClient(broker.bootstrap) as c:
        ok = alter(c, TOPIC, topic, [("cleanup.policy", SET, "delete"),
                                     ("cleanup.policy", SUBTRACT, "compact")])
        assert ok["error_code"] == 0
        assert alter(c, TOPIC, topic, [("retention.bytes", SET, "1")],
                     validate_only=True)["error_code"] == 0
        assert configs(c, topic)["retention.bytes"]["value"] == "-1"
        assert alter(c, TOPIC, "no-such-topic", [("retention.ms", SET, "1")])["error_code"] \
            == errors.UNKNOWN_TOPIC_OR_PARTITION


def test_alter_configs_replaces_every_config(broker, new_topic):
    topic = new_topic(partitions=1, configs={"retention.ms": "5000"})
    with WireClient(broker.bootstrap) as c:
        resp = c.request(schemas.ALTER_CONFIGS, 1, {"resources": [{
            "resource_type": TOPIC, "resource_name": topic,
            "configs": [{"name": "retention.bytes", "value": "9000"}]}],
            "validate_only": False})
        assert resp["responses"][0]["error_code"] == 0
        got = configs(c, topic)
        assert got["retention.bytes"]["value"] == "9000"
        assert got["retention.ms"]["config_source"] == ConfigSource.DEFAULT_CONFIG


def test_create_topics_refuses_unknown_and_unsupported_configs(broker):
    with WireClient(broker.bootstrap) as c:
        for configs_, words in (({"retention.msec": "1"}, "Unknown topic config name"),
                                ({"cleanup.policy": "shrink"}, "String must be one of")):
            resp = c.request(schemas.CREATE_TOPICS, 4, {"topics": [{
                "name": f"refused-{time.monotonic_ns()}", "num_partitions": 1,
                "replication_factor": 1, "assignments": [],
                "configs": [{"name": k, "value": v} for k, v in configs_.items()]}],
                "timeout_ms": 1000, "validate_only": False})
            (t,) = resp["topics"]
            assert t["error_code"] == errors.INVALID_CONFIG and words in t["error_message"]


def test_configs_and_segment_bytes_persist_and_apply_after_restart(tmp_path):
    with EmbeddedBroker(data_dir=tmp_path, topics={"seg": 1},
                        log_path=tmp_path / "b.log") as b:
        with WireClient(b.bootstrap) as c:
            assert alter(c, TOPIC, "seg", [("segment.bytes", SET, "2000"),
                                           ("retention.ms", SET, "86400000")])["error_code"] == 0
            for i in range(6):
                produce(c, "seg", 0, batch([bytes([65 + i]) * 900]))
        files = sorted((tmp_path / "topics" / "seg" / "0").glob("*.log"))
        assert len(files) >= 2  # rolled at 2000 bytes, not the default 64 MiB
        b.kill()
        b.start()
        with WireClient(b.bootstrap) as c:
            got = configs(c, "seg")
            assert (got["segment.bytes"]["value"], got["retention.ms"]["value"]) == (
                "2000", "86400000")
            for i in range(6):
                produce(c, "seg", 0, batch([bytes([75 + i]) * 900]))
        assert len(sorted((tmp_path / "topics" / "seg" / "0").glob("*.log"))) >= len(files) + 2


def test_delete_records_moves_the_log_start(broker, new_topic):
    topic = new_topic(partitions=2)
    with WireClient(broker.bootstrap) as c:
        produce(c, topic, 0, batch([b"r%d" % i for i in range(10)]))  # one batch: 0-9
        produce(c, topic, 0, batch([b"s%d" % i for i in range(5)]))  # 10-14
        resp = c.request(schemas.DELETE_RECORDS, 2, {"topics": [{"name": topic, "partitions": [
            {"partition_index": 0, "offset": 4}, {"partition_index": 1, "offset": 3},
            {"partition_index": 9, "offset": 0}]}], "timeout_ms": 1000})
        parts = resp["topics"][0]["partitions"]
        assert [(p["low_watermark"], p["error_code"]) for p in parts] == [
            (4, 0), (-1, errors.OFFSET_OUT_OF_RANGE), (-1, errors.UNKNOWN_TOPIC_OR_PARTITION)]
        assert list_offset(c, topic, 0, -2)["offset"] == 4
        assert fetch(c, topic, 0, 3)["error_code"] == errors.OFFSET_OUT_OF_RANGE
        got = fetch(c, topic, 0, 4)  # the containing batch; the client skips below 4
        assert got["log_start_offset"] == 4 and b"r4" in record_values(got["records"])
        resp = c.request(schemas.DELETE_RECORDS, 0, {"topics": [{"name": topic, "partitions": [
            {"partition_index": 0, "offset": -1}]}], "timeout_ms": 1000})
        assert resp["topics"][0]["partitions"][0]["low_watermark"] == 15  # -1: everything
        assert produce(c, topic, 0, batch([b"next"]))["base_offset"] == 15


def test_delete_records_inside_a_batch_survives_a_restart(tmp_path):
    with EmbeddedBroker(data_dir=tmp_path, topics={"dr": 1},
                        log_path=tmp_path / "b.log") as b:
        with WireClient(b.bootstrap) as c:
            produce(c, "dr", 0, batch([b"a%d" % i for i in range(10)]))
            produce(c, "dr", 0, batch([b"b%d" % i for i in range(10)]))
            resp = c.request(schemas.DELETE_RECORDS, 1, {"topics": [{"name": "dr", "partitions": [
                {"partition_index": 0, "offset": 5}]}], "timeout_ms": 1000})
            assert resp["topics"][0]["partitions"][0]["low_watermark"] == 5
        b.kill()
        b.start()
        with WireClient(b.bootstrap) as c:
            assert list_offset(c, "dr", 0, -2)["offset"] == 5  # not 0, not 10
            assert list_offset(c, "dr", 0, -1)["offset"] == 20
            assert fetch(c, "dr", 0, 4)["error_code"] == errors.OFFSET_OUT_OF_RANGE
            assert b"a5" in record_values(fetch(c, "dr", 0, 5)["records"])


@pytest.mark.parametrize("version", [0, 1, 2])
def test_describe_cluster(broker, version):
    port = int(broker.bootstrap.rpartition(":")[2])
    with WireClient(broker.bootstrap) as c:
        resp = c.request(schemas.DESCRIBE_CLUSTER, version, {
            "include_cluster_authorized_operations": True, "endpoint_type": 1,
            "include_fenced_brokers": True})
    assert (resp["error_code"], resp["cluster_id"], resp["controller_id"]) == (
        0, "appliance-embedded", 0)
    assert [(b["broker_id"], b["host"], b["port"]) for b in resp["brokers"]] == [
        (0, "127.0.0.1", port)]
    assert resp["cluster_authorized_operations"] > 0


def test_configs_an_older_broker_stored_without_effect_do_not_block_alterations(tmp_path):
    with EmbeddedBroker(data_dir=tmp_path, topics={"old": 1},
                        log_path=tmp_path / "b.log") as b:
        with WireClient(b.bootstrap) as c:
            assert alter(c, TOPIC, "old", [("retention.ms", SET, "5000")])["error_code"] == 0
        b.stop()
        meta = tmp_path / "topics" / "old" / "topic.json"
        doc = json.loads(meta.read_text())  # as an older broker wrote it: any name stored
        doc["configs"].update({"min.insync.replicas": "2", "retention.msec": "10"})
        meta.write_text(json.dumps(doc))
        b.start()
        with WireClient(b.bootstrap) as c:
            assert alter(c, TOPIC, "old", [("retention.bytes", SET, "9")])["error_code"] == 0
            got = configs(c, "old")
            assert (got["retention.ms"]["value"], got["min.insync.replicas"]["value"]) == (
                "5000", "1")
        assert "broker.topic_configs_ignored" in (tmp_path / "b.log").read_text()
