"""Exact accounting against the broker for its storage fault tests: produce one record per
request with acks=all and keep the (partition, offset) the broker acknowledged, and read a
partition back whole as ``{offset: value}`` (gaps included), over the Kafka protocol."""

from __future__ import annotations

import urllib.request

from kafka.record import MemoryRecords
from kafka.record.default_records import DefaultRecordBatchBuilder

from appliance.broker.wire import schemas
from appliance.broker.wire.client import WireClient

PRODUCE_V = 8
FETCH_V = 11


def one_record(value: bytes) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                  producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                  batch_size=1 << 30)
    b.append(0, timestamp=1_700_000_000_000, key=None, value=value, headers=[])
    return bytes(b.build())


def produce(client: WireClient, topic: str, partition: int, value: bytes) -> tuple[int, int]:
    """(error_code, base_offset) of one acks=all produce of ``value``."""
    resp = client.request(schemas.PRODUCE, PRODUCE_V, {
        "transactional_id": None, "acks": -1, "timeout_ms": 5000,
        "topic_data": [{"name": topic, "partition_data": [
            {"index": partition, "records": one_record(value)}]}]})
    part = resp["responses"][0]["partition_responses"][0]
    return part["error_code"], part["base_offset"]


def create_topic(client: WireClient, topic: str, partitions: int) -> int:
    resp = client.request(schemas.CREATE_TOPICS, 5, {
        "topics": [{"name": topic, "num_partitions": partitions, "replication_factor": 1,
                    "assignments": [], "configs": []}],
        "timeout_ms": 5000, "validate_only": False})
    return resp["topics"][0]["error_code"]


def topic_partitions(client: WireClient) -> dict[str, int]:
    meta = client.request(schemas.METADATA, 9, {"topics": None,
                                                "allow_auto_topic_creation": False})
    return {t["name"]: len(t["partitions"]) for t in meta["topics"]}


def _list_offset(client: WireClient, topic: str, partition: int, timestamp: int) -> int:
    resp = client.request(schemas.LIST_OFFSETS, 5, {
        "replica_id": -1, "isolation_level": 0,
        "topics": [{"name": topic, "partitions": [{"partition_index": partition,
                                                   "current_leader_epoch": -1,
                                                   "timestamp": timestamp}]}]})
    part = resp["topics"][0]["partitions"][0]
    assert part["error_code"] == 0, part
    return part["offset"]


def read_partition(bootstrap: str, topic: str, partition: int) -> dict[int, bytes]:
    """offset -> value of every record the partition serves, from its start to its end."""
    out: dict[int, bytes] = {}
    with WireClient(bootstrap) as c:
        offset = _list_offset(c, topic, partition, -2)
        end = _list_offset(c, topic, partition, -1)
        for _ in range(end - offset + 1):  # each fetch moves at least one offset on
            if offset >= end:
                return out
            resp = c.request(schemas.FETCH, FETCH_V, {
                "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 24,
                "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                "topics": [{"topic": topic, "partitions": [{
                    "partition": partition, "current_leader_epoch": -1,
                    "fetch_offset": offset, "log_start_offset": -1,
                    "partition_max_bytes": 1 << 24}]}],
                "forgotten_topics_data": [], "rack_id": ""})
            part = resp["responses"][0]["partitions"][0]
            assert part["error_code"] == 0, part
            records = MemoryRecords(bytes(part["records"]))
            moved = False
            while (b := records.next_batch()) is not None:
                for r in b:
                    if r.offset >= offset:
                        out[r.offset] = r.value
                        moved = True
            assert moved, f"{topic}-{partition}: nothing at or after {offset} below {end}"
            offset = max(out) + 1
    raise AssertionError(f"{topic}-{partition}: read did not reach the end offset")


def metric_sum(url: str, name: str) -> float:
    """Sum of every sample of ``name`` (all label values) on a Prometheus endpoint."""
    total = 0.0
    for line in urllib.request.urlopen(url, timeout=10).read().decode().splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            total += float(line.rsplit(" ", 1)[1])
    return total
