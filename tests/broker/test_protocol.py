"""Protocol-level behaviour over raw sockets: versions, errors, idempotence, long-poll."""

from __future__ import annotations

import socket
import struct
import threading
import time

import pytest

from appliance.broker.wire import errors, schemas
from appliance.broker.wire.client import WireClient

from support.wire_helpers import (
    FETCH_V,
    batch,
    fetch,
    fetch_body,
    high_watermark,
    list_offset,
    metadata,
    produce,
    record_values,
)


def _wait_for_log(broker, text: str, timeout_s: float = 5.0) -> None:
    """The broker writes one structured JSON line per refused request."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if text in broker.log_path.read_text(errors="replace"):
            return
        time.sleep(0.05)
    raise AssertionError(f"{text!r} not in the broker log {broker.log_path}")


def _broker_still_serves(bootstrap: str) -> None:
    with WireClient(bootstrap) as c:
        resp = c.request(schemas.API_VERSIONS, 3, {"client_software_name": "t",
                                                   "client_software_version": "1"})
        assert resp["error_code"] == 0


def test_api_versions_lists_every_api_in_flexible_v3(broker):
    with WireClient(broker.bootstrap) as c:
        resp = c.request(schemas.API_VERSIONS, 3, {"client_software_name": "t",
                                                   "client_software_version": "1"})
    keys = {a["api_key"]: (a["min_version"], a["max_version"]) for a in resp["api_keys"]}
    assert resp["error_code"] == 0
    assert keys[0][0] >= 3 and keys[1][1] <= 12  # Produce needs v2 batches; Fetch by name
    assert set(keys) >= {0, 1, 2, 3, 10, 18, 19, 20, 22, 37}


def test_api_versions_unknown_version_answers_v0_with_supported_ranges(broker):
    with WireClient(broker.bootstrap) as c:
        frame = c.encode(schemas.API_VERSIONS, 3, {"client_software_name": "x",
                                                   "client_software_version": "1"})
        frame = frame[:6] + struct.pack(">h", 77) + frame[8:]  # claim ApiVersions v77
        c.send_raw(frame)
        corr, resp = c.decode_response(schemas.API_VERSIONS, 0, c.recv_frame())
        assert resp["error_code"] == errors.UNSUPPORTED_VERSION
        assert {a["api_key"] for a in resp["api_keys"]} >= {0, 1, 3, 18}
        # the same connection then negotiates normally
        again = c.request(schemas.API_VERSIONS, 3, {"client_software_name": "x",
                                                    "client_software_version": "1"})
        assert again["error_code"] == 0


def test_unsupported_api_version_closes_that_connection_only(broker):
    with WireClient(broker.bootstrap, timeout=5) as c:
        frame = c.encode(schemas.METADATA, 1, {"topics": None})
        c.send_raw(frame[:6] + struct.pack(">h", 99) + frame[8:])
        with pytest.raises(ConnectionError):
            c.recv_frame()
    _wait_for_log(broker, '"reason": "unsupported api version", "api": "Metadata"')
    _broker_still_serves(broker.bootstrap)


def test_unknown_api_key_closes_that_connection_only(broker):
    with WireClient(broker.bootstrap, timeout=5) as c:
        c.send_raw(struct.pack(">ihhi", 10, 9999, 0, 1) + b"\xff\xff")
        with pytest.raises(ConnectionError):
            c.recv_frame()
    _broker_still_serves(broker.bootstrap)


@pytest.mark.parametrize("garbage", [
    b"\x00\x00\x00\x05hello",  # a frame too short for a request header
    b"\x7f\xff\xff\xff" + b"x" * 64,  # absurd frame size
    b"\xff\xff\xff\xfe",  # negative frame size
    struct.pack(">ihhi", 14, 3, 9, 7) + b"\x00\x01x" + b"\xff\xff\xff",  # body cut short
])
def test_garbage_bytes_close_connection_and_broker_keeps_serving(broker, garbage):
    with WireClient(broker.bootstrap, timeout=5) as c:
        c.send_raw(garbage)
        with pytest.raises((ConnectionError, socket.timeout, OSError)):
            c.recv_frame()
    _wait_for_log(broker, '"event": "broker.connection_closed"')
    _broker_still_serves(broker.bootstrap)


def test_client_disconnecting_mid_request_does_not_hurt_others(broker, new_topic):
    topic = new_topic(partitions=1)
    with WireClient(broker.bootstrap) as c:
        frame = c.encode(schemas.PRODUCE, 8, {
            "transactional_id": None, "acks": -1, "timeout_ms": 1000,
            "topic_data": [{"name": topic, "partition_data": [
                {"index": 0, "records": batch([b"half"])}]}]})
        c.send_raw(frame[: len(frame) // 2])
    with WireClient(broker.bootstrap) as c:
        assert produce(c, topic, 0, batch([b"whole"]))["error_code"] == 0
    assert high_watermark(broker.bootstrap, topic, 0) == 1


def test_unknown_topic_errors_without_auto_creation(broker):
    name = "no-such-topic-" + str(time.monotonic_ns())
    with WireClient(broker.bootstrap) as c:
        meta = metadata(c, [name])
        assert meta["topics"][0]["error_code"] == errors.UNKNOWN_TOPIC_OR_PARTITION
        assert produce(c, name, 0, batch([b"x"]))["error_code"] == \
            errors.UNKNOWN_TOPIC_OR_PARTITION
        assert fetch(c, name, 0, 0)["error_code"] == errors.UNKNOWN_TOPIC_OR_PARTITION
        assert list_offset(c, name, 0, -1)["error_code"] == errors.UNKNOWN_TOPIC_OR_PARTITION
        assert name not in {t["name"] for t in metadata(c, None)["topics"]}


def test_unknown_partition_of_known_topic(broker, new_topic):
    topic = new_topic(partitions=1)
    with WireClient(broker.bootstrap) as c:
        assert produce(c, topic, 5, batch([b"x"]))["error_code"] == \
            errors.UNKNOWN_TOPIC_OR_PARTITION


def test_metadata_all_versions_describe_topic(broker, new_topic):
    topic = new_topic(partitions=3)
    with WireClient(broker.bootstrap) as c:
        for v in range(schemas.METADATA.min_version, schemas.METADATA.max_version + 1):
            meta = metadata(c, [topic], version=v)
            t = meta["topics"][0]
            assert (t["error_code"], t["name"], len(t["partitions"])) == (0, topic, 3), v
            assert meta["brokers"][0]["port"] == int(broker.bootstrap.rpartition(":")[2])


def test_high_watermark_exact_after_every_produce(broker, new_topic):
    topic = new_topic(partitions=1)
    expected = 0
    with WireClient(broker.bootstrap) as c:
        for n in (1, 7, 1, 250, 3):
            resp = produce(c, topic, 0, batch([b"v%d" % i for i in range(n)]))
            assert (resp["error_code"], resp["base_offset"]) == (0, expected)
            expected += n
            assert list_offset(c, topic, 0, -1)["offset"] == expected


def test_fetch_from_middle_of_batch_returns_containing_batch(broker, new_topic):
    topic = new_topic(partitions=1)
    with WireClient(broker.bootstrap) as c:
        produce(c, topic, 0, batch([b"a", b"b", b"c"]))
        produce(c, topic, 0, batch([b"d", b"e"]))
        part = fetch(c, topic, 0, 4)
        assert record_values(part["records"]) == [b"d", b"e"]
        part = fetch(c, topic, 0, 1)
        assert record_values(part["records"]) == [b"a", b"b", b"c", b"d", b"e"]
        assert part["high_watermark"] == 5
        assert fetch(c, topic, 0, 6)["error_code"] == errors.OFFSET_OUT_OF_RANGE


def test_fetch_returns_at_least_one_batch_even_if_larger_than_max_bytes(broker, new_topic):
    topic = new_topic(partitions=1)
    with WireClient(broker.bootstrap) as c:
        produce(c, topic, 0, batch([b"x" * 5000]))
        produce(c, topic, 0, batch([b"y" * 5000]))
        body = fetch_body(topic, 0, 0)
        body["max_bytes"] = 100
        body["topics"][0]["partitions"][0]["partition_max_bytes"] = 100
        resp = c.request(schemas.FETCH, FETCH_V, body)
        assert record_values(resp["responses"][0]["partitions"][0]["records"]) == [b"x" * 5000]


def test_list_offsets_earliest_latest_and_by_timestamp(broker, new_topic):
    topic = new_topic(partitions=1)
    with WireClient(broker.bootstrap) as c:
        produce(c, topic, 0, batch([b"a", b"b", b"c"], timestamp_ms=1000))  # ts 1000..1002
        produce(c, topic, 0, batch([b"d"], timestamp_ms=5000))
        assert list_offset(c, topic, 0, -2)["offset"] == 0
        assert list_offset(c, topic, 0, -1)["offset"] == 4
        hit = list_offset(c, topic, 0, 1001)
        assert (hit["offset"], hit["timestamp"]) == (1, 1001)
        assert list_offset(c, topic, 0, 1003)["offset"] == 3
        assert list_offset(c, topic, 0, 9999)["offset"] == -1


def test_record_batch_over_max_message_bytes_is_refused(broker, new_topic):
    topic = new_topic(partitions=1, configs={"max.message.bytes": "2000"})
    with WireClient(broker.bootstrap) as c:
        resp = produce(c, topic, 0, batch([b"z" * 3000]))
        assert resp["error_code"] == errors.MESSAGE_TOO_LARGE
        assert produce(c, topic, 0, batch([b"small"]))["error_code"] == 0
    assert high_watermark(broker.bootstrap, topic, 0) == 1


def test_corrupt_record_set_is_refused_and_nothing_appended(broker, new_topic):
    topic = new_topic(partitions=1)
    good = batch([b"a"])
    with WireClient(broker.bootstrap) as c:
        assert produce(c, topic, 0, good[:-5])["error_code"] == errors.CORRUPT_MESSAGE
        magic1 = good[:16] + b"\x01" + good[17:]
        assert produce(c, topic, 0, magic1)["error_code"] == errors.CORRUPT_MESSAGE
        no_records = good[:57] + b"\x00\x00\x00\x00" + good[61:]  # recordsCount = 0
        assert produce(c, topic, 0, no_records)["error_code"] == errors.CORRUPT_MESSAGE
    assert high_watermark(broker.bootstrap, topic, 0) == 0


def test_invalid_acks_is_refused(broker, new_topic):
    topic = new_topic(partitions=1)
    with WireClient(broker.bootstrap) as c:
        assert produce(c, topic, 0, batch([b"a"]), acks=2)["error_code"] == \
            errors.INVALID_REQUIRED_ACKS


def test_acks_zero_gets_no_response_but_appends(broker, new_topic):
    topic = new_topic(partitions=1)
    with WireClient(broker.bootstrap) as c:
        produce(c, topic, 0, batch([b"a"]), acks=0)
        # the next response on this connection must be for the next request
        assert list_offset(c, topic, 0, -1)["offset"] == 1


def _init_pid(c: WireClient) -> tuple[int, int]:
    resp = c.request(schemas.INIT_PRODUCER_ID, 1, {"transactional_id": None,
                                                    "transaction_timeout_ms": 60000})
    assert resp["error_code"] == 0
    return resp["producer_id"], resp["producer_epoch"]


def test_replayed_idempotent_produce_is_not_appended_twice(broker, new_topic):
    topic = new_topic(partitions=1)
    with WireClient(broker.bootstrap) as c:
        pid, epoch = _init_pid(c)
        first = c.encode(schemas.PRODUCE, 8, {
            "transactional_id": None, "acks": -1, "timeout_ms": 5000,
            "topic_data": [{"name": topic, "partition_data": [
                {"index": 0, "records": batch([b"a", b"b"], pid, epoch, 0)}]}]},
            correlation_id=1)
        offsets = []
        for _ in range(2):  # the very same bytes, as a retry after a lost response
            c.send_raw(first)
            _, resp = c.decode_response(schemas.PRODUCE, 8, c.recv_frame())
            part = resp["responses"][0]["partition_responses"][0]
            assert part["error_code"] == 0
            offsets.append(part["base_offset"])
        assert offsets == [0, 0]
        assert list_offset(c, topic, 0, -1)["offset"] == 2
        nxt = produce(c, topic, 0, batch([b"c"], pid, epoch, 2))
        assert (nxt["error_code"], nxt["base_offset"]) == (0, 2)
        # a gap in sequence numbers
        gap = produce(c, topic, 0, batch([b"e"], pid, epoch, 9))
        assert gap["error_code"] == errors.OUT_OF_ORDER_SEQUENCE_NUMBER
        # an older batch that is no longer the last one is still recognised
        again = produce(c, topic, 0, batch([b"a", b"b"], pid, epoch, 0))
        assert (again["error_code"], again["base_offset"]) == (0, 0)
        assert list_offset(c, topic, 0, -1)["offset"] == 3


def test_fetch_long_poll_is_answered_when_a_record_arrives(broker, new_topic):
    topic = new_topic(partitions=1)
    with WireClient(broker.bootstrap) as consumer, WireClient(broker.bootstrap) as producer:
        start = time.monotonic()
        consumer.send_raw(consumer.encode(schemas.FETCH, FETCH_V,
                                          fetch_body(topic, 0, 0, max_wait_ms=2000)))
        timer = threading.Timer(0.2, lambda: produce(producer, topic, 0, batch([b"wake"])))
        timer.start()
        try:
            _, resp = consumer.decode_response(schemas.FETCH, FETCH_V, consumer.recv_frame())
        finally:
            timer.join()
        elapsed = time.monotonic() - start
        assert record_values(resp["responses"][0]["partitions"][0]["records"]) == [b"wake"]
        assert elapsed < 1.9, f"fetch waited out its max wait ({elapsed:.2f}s)"


def test_fetch_with_zero_wait_returns_at_once_without_data(broker, new_topic):
    topic = new_topic(partitions=1)
    with WireClient(broker.bootstrap) as c:
        part = fetch(c, topic, 0, 0, max_wait_ms=0)
        assert part["error_code"] == 0 and len(part["records"]) == 0


def test_fetch_waits_out_max_wait_when_nothing_arrives(broker, new_topic):
    topic = new_topic(partitions=1)
    with WireClient(broker.bootstrap) as c:
        start = time.monotonic()
        part = fetch(c, topic, 0, 0, max_wait_ms=300)
        assert time.monotonic() - start >= 0.29
        assert part["error_code"] == 0 and len(part["records"]) == 0


def test_fetch_min_bytes_holds_until_enough_data(broker, new_topic):
    topic = new_topic(partitions=1)
    with WireClient(broker.bootstrap) as consumer, WireClient(broker.bootstrap) as producer:
        consumer.send_raw(consumer.encode(schemas.FETCH, FETCH_V, fetch_body(
            topic, 0, 0, max_wait_ms=5000, min_bytes=3000)))
        produce(producer, topic, 0, batch([b"s" * 100]))
        consumer.sock.settimeout(0.3)
        with pytest.raises(socket.timeout):
            consumer.recv_frame()  # 100 bytes is not enough yet
        consumer.sock.settimeout(10)
        produce(producer, topic, 0, batch([b"L" * 4000]))
        _, resp = consumer.decode_response(schemas.FETCH, FETCH_V, consumer.recv_frame())
        assert record_values(resp["responses"][0]["partitions"][0]["records"]) == [
            b"s" * 100, b"L" * 4000]


def test_one_request_at_a_time_per_connection_as_kafka(broker, new_topic):
    """Pipelined requests are read one at a time: the produce sent behind a waiting fetch
    on the same connection is not even read until the fetch is answered (Kafka mutes a
    connection while its request is in flight), so it cannot wake that fetch; responses
    keep request order."""
    topic = new_topic(partitions=1)
    with WireClient(broker.bootstrap) as c:
        started = time.monotonic()
        c.send_raw(c.encode(schemas.FETCH, FETCH_V, fetch_body(topic, 0, 0, max_wait_ms=1000),
                            correlation_id=101))
        c.send_raw(c.encode(schemas.METADATA, 9, {"topics": [{"name": topic}],
                                                  "allow_auto_topic_creation": False},
                            correlation_id=102))
        c.send_raw(c.encode(schemas.PRODUCE, 8, {
            "transactional_id": None, "acks": 1, "timeout_ms": 1000,
            "topic_data": [{"name": topic, "partition_data": [
                {"index": 0, "records": batch([b"same-conn"])}]}]}, correlation_id=103))
        corr1, fetched = c.decode_response(schemas.FETCH, FETCH_V, c.recv_frame())
        waited = time.monotonic() - started
        corr2, _ = c.decode_response(schemas.METADATA, 9, c.recv_frame())
        corr3, produced = c.decode_response(schemas.PRODUCE, 8, c.recv_frame())
        assert (corr1, corr2, corr3) == (101, 102, 103)
        assert record_values(fetched["responses"][0]["partitions"][0]["records"]) == []
        assert waited >= 0.9  # the whole wait: the produce behind it was not read
        assert produced["responses"][0]["partition_responses"][0]["base_offset"] == 0


def test_create_delete_and_grow_topics(broker):
    name = "admin-" + str(time.monotonic_ns())
    with WireClient(broker.bootstrap) as c:
        def create(topic, n, rf=1, version=5):
            resp = c.request(schemas.CREATE_TOPICS, version, {
                "topics": [{"name": topic, "num_partitions": n, "replication_factor": rf,
                            "assignments": [], "configs": []}],
                "timeout_ms": 1000, "validate_only": False})
            return resp["topics"][0]

        assert create(name, -1)["error_code"] == 0
        assert len(metadata(c, [name])["topics"][0]["partitions"]) == 1  # default 1
        assert create(name, 2)["error_code"] == errors.TOPIC_ALREADY_EXISTS
        assert create("bad/name", 1)["error_code"] == errors.INVALID_TOPIC_EXCEPTION
        assert create(name + "x", 1, rf=3)["error_code"] == errors.INVALID_REPLICATION_FACTOR
        assert create(name + "y", 0)["error_code"] == errors.INVALID_PARTITIONS

        grow = c.request(schemas.CREATE_PARTITIONS, 2, {
            "topics": [{"name": name, "count": 3, "assignments": None}],
            "timeout_ms": 1000, "validate_only": False})
        assert grow["results"][0]["error_code"] == 0
        assert len(metadata(c, [name])["topics"][0]["partitions"]) == 3
        shrink = c.request(schemas.CREATE_PARTITIONS, 0, {
            "topics": [{"name": name, "count": 2, "assignments": None}],
            "timeout_ms": 1000, "validate_only": False})
        assert shrink["results"][0]["error_code"] == errors.INVALID_PARTITIONS

        for version in (1, 4):
            deleted = c.request(schemas.DELETE_TOPICS, version, {"topic_names": [name],
                                                                 "timeout_ms": 1000})
            expect = 0 if version == 1 else errors.UNKNOWN_TOPIC_OR_PARTITION
            assert deleted["responses"][0]["error_code"] == expect
        assert metadata(c, [name])["topics"][0]["error_code"] == \
            errors.UNKNOWN_TOPIC_OR_PARTITION


def test_find_coordinator_serves_groups_and_transactional_ids(broker):
    port = int(broker.bootstrap.rpartition(":")[2])
    with WireClient(broker.bootstrap) as c:
        for version in (0, 2, 3):
            resp = c.request(schemas.FIND_COORDINATOR, version, {"key": "g", "key_type": 0})
            assert (resp["error_code"], resp["port"]) == (0, port)
        resp = c.request(schemas.FIND_COORDINATOR, 2, {"key": "txn", "key_type": 1})
        assert (resp["error_code"], resp["port"]) == (0, port)
        resp = c.request(schemas.FIND_COORDINATOR, 3, {"key": "x", "key_type": 7})
        assert resp["error_code"] == errors.INVALID_REQUEST
        resp = c.request(schemas.FIND_COORDINATOR, 4, {"key_type": 0,
                                                       "coordinator_keys": ["g1", "g2"]})
        assert [(x["key"], x["error_code"], x["port"]) for x in resp["coordinators"]] == [
            ("g1", 0, port), ("g2", 0, port)]
        resp = c.request(schemas.FIND_COORDINATOR, 4, {"key_type": 1,
                                                       "coordinator_keys": ["t1"]})
        assert [(x["key"], x["error_code"], x["port"]) for x in resp["coordinators"]] == [
            ("t1", 0, port)]


def _commit(c, group, topic, partition, offset, version=2, generation=-1, member=""):
    resp = c.request(schemas.OFFSET_COMMIT, version, {
        "group_id": group, "generation_id": generation, "member_id": member,
        "retention_time_ms": -1, "topics": [{"name": topic, "partitions": [
            {"partition_index": partition, "committed_offset": offset,
             "committed_leader_epoch": -1, "committed_metadata": "m"}]}]})
    return resp["topics"][0]["partitions"][0]["error_code"]


def test_offset_commit_and_fetch(broker, new_topic):
    topic = new_topic(partitions=2)
    group = f"grp-{time.monotonic_ns()}"
    with WireClient(broker.bootstrap) as c:
        assert _commit(c, group, topic, 1, 42) == 0
        assert _commit(c, group, topic, 0, 7, version=7) == 0
        assert _commit(c, group, topic, 9, 1) == errors.UNKNOWN_TOPIC_OR_PARTITION
        assert _commit(c, group, "no-such-topic", 0, 1) == errors.UNKNOWN_TOPIC_OR_PARTITION
        assert _commit(c, group, topic, 0, 1, generation=3, member="m1") == \
            errors.UNKNOWN_MEMBER_ID  # there are no group members on this broker
        for version in (1, 5):
            resp = c.request(schemas.OFFSET_FETCH, version, {
                "group_id": group, "topics": [{"name": topic, "partition_indexes": [0, 1]}]})
            got = [(p["partition_index"], p["committed_offset"], p["error_code"])
                   for p in resp["topics"][0]["partitions"]]
            assert got == [(0, 7, 0), (1, 42, 0)]
        resp = c.request(schemas.OFFSET_FETCH, 3, {"group_id": group, "topics": None})
        assert {(t["name"], p["partition_index"], p["committed_offset"])
                for t in resp["topics"] for p in t["partitions"]} == {(topic, 0, 7),
                                                                      (topic, 1, 42)}
        resp = c.request(schemas.OFFSET_FETCH, 5, {
            "group_id": "other-group", "topics": [{"name": topic, "partition_indexes": [0]}]})
        assert resp["topics"][0]["partitions"][0]["committed_offset"] == -1


def test_retention_by_bytes_drops_oldest_batches(broker, new_topic):
    topic = new_topic(partitions=1, configs={"retention.bytes": "3000"})
    with WireClient(broker.bootstrap) as c:
        for i in range(10):
            produce(c, topic, 0, batch([bytes([65 + i]) * 1000]))
        deadline = time.monotonic() + 10
        start = 0
        while time.monotonic() < deadline:  # the retention sweep runs every second
            start = list_offset(c, topic, 0, -2)["offset"]
            if start >= 6:
                break
            time.sleep(0.1)
        assert 6 <= start <= 8  # only the newest ~3000 bytes remain
        assert list_offset(c, topic, 0, -1)["offset"] == 10
        assert fetch(c, topic, 0, 0)["error_code"] == errors.OFFSET_OUT_OF_RANGE
        assert record_values(fetch(c, topic, 0, start)["records"])[-1] == b"J" * 1000


def test_retention_by_time_drops_old_batches(broker, new_topic):
    topic = new_topic(partitions=1, configs={"retention.ms": "200"})
    with WireClient(broker.bootstrap) as c:
        produce(c, topic, 0, batch([b"old"]))
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and list_offset(c, topic, 0, -2)["offset"] == 0:
            time.sleep(0.1)
        assert list_offset(c, topic, 0, -2)["offset"] == 1
        assert produce(c, topic, 0, batch([b"new"]))["base_offset"] == 1


def test_the_api_table_in_the_docs_is_what_api_versions_advertises(broker):
    """docs/broker.md lists the served APIs and versions; it must not drift from the code."""
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "broker.md").read_text()
    table = doc.split("| key | API | served versions | notes |", 1)[1].split("\n\n", 1)[0]
    documented = {}
    for row in table.strip().splitlines()[1:]:
        key, name, versions = (c.strip() for c in row.strip("|").split("|")[:3])
        low, _, high = versions.partition("-")
        documented[int(key)] = (name, int(low), int(high or low))
    with WireClient(broker.bootstrap) as c:
        resp = c.request(schemas.API_VERSIONS, 3, {"client_software_name": "t",
                                                   "client_software_version": "1"})
    advertised = {a["api_key"]: (schemas.BY_KEY[a["api_key"]].name, a["min_version"],
                                 a["max_version"]) for a in resp["api_keys"]}
    assert documented == advertised
