"""Kafka-protocol helpers for tests that talk to the broker request by request (the broker
suite, the broker's fault tests): real v2 batches, raw produce, fetch, list-offsets and
metadata requests, and a partition read back whole.

Batches come from kafka-python's own batch builder (real CRC, real producer state) so
the broker sees exactly what a client would send.
"""

from __future__ import annotations

from kafka.record import MemoryRecords
from kafka.record.default_records import DefaultRecordBatchBuilder

from appliance.broker.wire import schemas
from appliance.broker.wire.client import WireClient

PRODUCE_V = 8
FETCH_V = 11


def batch(values: list[bytes], producer_id: int = -1, epoch: int = -1, sequence: int = -1,
          timestamp_ms: int = 1_700_000_000_000) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                  producer_id=producer_id, producer_epoch=epoch,
                                  base_sequence=sequence, batch_size=1 << 30)
    for i, v in enumerate(values):
        b.append(i, timestamp=timestamp_ms + i, key=None, value=v, headers=[])
    return bytes(b.build())


def produce_body(topic: str, partition: int, records: bytes, acks: int = -1) -> dict:
    return {"transactional_id": None, "acks": acks, "timeout_ms": 5000,
            "topic_data": [{"name": topic,
                            "partition_data": [{"index": partition, "records": records}]}]}


def produce(client: WireClient, topic: str, partition: int, records: bytes,
            acks: int = -1) -> dict:
    resp = client.request(schemas.PRODUCE, PRODUCE_V, produce_body(topic, partition, records,
                                                                   acks))
    if acks == 0:
        return {}
    return resp["responses"][0]["partition_responses"][0]


def produce_one(client: WireClient, topic: str, partition: int,
                value: bytes) -> tuple[int, int]:
    """(error_code, base_offset) of one acks=all produce of one record ``value``."""
    part = produce(client, topic, partition, batch([value]))
    return part["error_code"], part["base_offset"]


def fetch_body(topic: str, partition: int, offset: int, max_wait_ms: int = 0,
               min_bytes: int = 1, max_bytes: int = 1 << 20) -> dict:
    return {"replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": min_bytes,
            "max_bytes": max_bytes, "isolation_level": 0, "session_id": 0,
            "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [{
                "partition": partition, "current_leader_epoch": -1, "fetch_offset": offset,
                "log_start_offset": -1, "partition_max_bytes": max_bytes}]}],
            "forgotten_topics_data": [], "rack_id": ""}


def fetch(client: WireClient, topic: str, partition: int, offset: int, max_wait_ms: int = 0,
          min_bytes: int = 1, max_bytes: int = 1 << 20) -> dict:
    resp = client.request(schemas.FETCH, FETCH_V, fetch_body(topic, partition, offset,
                                                             max_wait_ms, min_bytes, max_bytes))
    return resp["responses"][0]["partitions"][0]


def list_offset(client: WireClient, topic: str, partition: int, timestamp: int) -> dict:
    resp = client.request(schemas.LIST_OFFSETS, 5, {
        "replica_id": -1, "isolation_level": 0,
        "topics": [{"name": topic, "partitions": [{"partition_index": partition,
                                                   "current_leader_epoch": -1,
                                                   "timestamp": timestamp}]}]})
    return resp["topics"][0]["partitions"][0]


def offset_at(client: WireClient, topic: str, partition: int, timestamp: int) -> int:
    """``list_offset``'s offset, which must have come without an error (-2: the log start,
    -1: the end)."""
    part = list_offset(client, topic, partition, timestamp)
    assert part["error_code"] == 0, part
    return part["offset"]


def high_watermark(bootstrap: str, topic: str, partition: int) -> int:
    with WireClient(bootstrap) as c:
        return list_offset(c, topic, partition, -1)["offset"]


def metadata(client: WireClient, topics: list[str] | None = None, version: int = 9,
             **fields) -> dict:
    """A Metadata response for ``topics`` (None: every topic), never creating one;
    ``fields`` adds request fields of later versions."""
    return client.request(schemas.METADATA, version, {
        "topics": None if topics is None else [{"name": t} for t in topics],
        "allow_auto_topic_creation": False, **fields})


def topic_partitions(client: WireClient) -> dict[str, int]:
    """Every topic the broker serves, with its partition count."""
    return {t["name"]: len(t["partitions"]) for t in metadata(client)["topics"]}


def create_topic(client: WireClient, topic: str, partitions: int) -> int:
    """The error code of a CreateTopics of one topic."""
    resp = client.request(schemas.CREATE_TOPICS, 5, {
        "topics": [{"name": topic, "num_partitions": partitions, "replication_factor": 1,
                    "assignments": [], "configs": []}],
        "timeout_ms": 5000, "validate_only": False})
    return resp["topics"][0]["error_code"]


def record_offsets_values(records: bytes) -> list[tuple[int, bytes]]:
    """(offset, value) of every record in a fetched record set (decoded with kafka-python)."""
    out = []
    mr = MemoryRecords(bytes(records))
    while (b := mr.next_batch()) is not None:
        out.extend((r.offset, r.value) for r in b)
    return out


def record_values(records: bytes) -> list[bytes]:
    """Values of every record in a fetched record set."""
    return [value for _offset, value in record_offsets_values(records)]


def read_partition(bootstrap: str, topic: str, partition: int) -> dict[int, bytes]:
    """offset -> value of every record the partition serves, from its start to its end."""
    out: dict[int, bytes] = {}
    with WireClient(bootstrap) as c:
        offset = offset_at(c, topic, partition, -2)
        end = offset_at(c, topic, partition, -1)
        for _ in range(end - offset + 1):  # each fetch moves at least one offset on
            if offset >= end:
                return out
            part = fetch(c, topic, partition, offset, max_bytes=1 << 24)
            assert part["error_code"] == 0, part
            moved = False
            for at, value in record_offsets_values(part["records"]):
                if at >= offset:
                    out[at] = value
                    moved = True
            assert moved, f"{topic}-{partition}: nothing at or after {offset} below {end}"
            offset = max(out) + 1
    raise AssertionError(f"{topic}-{partition}: read did not reach the end offset")
