"""Helpers for protocol-level broker tests: build real v2 batches and raw requests.

Batches come from kafka-python's own batch builder (real CRC, real producer state) so
the broker sees exactly what a client would send.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from kafka.record.default_records import DefaultRecordBatchBuilder

from appliance.broker.wire import schemas
from appliance.broker.wire.client import WireClient
from appliance.connector import KAFKA_CLIENTS_JAR

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


def fetch_body(topic: str, partition: int, offset: int, max_wait_ms: int = 0,
               min_bytes: int = 1) -> dict:
    return {"replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": min_bytes,
            "max_bytes": 1 << 20, "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [{
                "partition": partition, "current_leader_epoch": -1, "fetch_offset": offset,
                "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": [], "rack_id": ""}


def fetch(client: WireClient, topic: str, partition: int, offset: int, max_wait_ms: int = 0,
          min_bytes: int = 1) -> dict:
    resp = client.request(schemas.FETCH, FETCH_V,
                          fetch_body(topic, partition, offset, max_wait_ms, min_bytes))
    return resp["responses"][0]["partitions"][0]


def list_offset(client: WireClient, topic: str, partition: int, timestamp: int) -> dict:
    resp = client.request(schemas.LIST_OFFSETS, 5, {
        "replica_id": -1, "isolation_level": 0,
        "topics": [{"name": topic, "partitions": [{"partition_index": partition,
                                                   "current_leader_epoch": -1,
                                                   "timestamp": timestamp}]}]})
    return resp["topics"][0]["partitions"][0]


def high_watermark(bootstrap: str, topic: str, partition: int) -> int:
    with WireClient(bootstrap) as c:
        return list_offset(c, topic, partition, -1)["offset"]


def record_values(records: bytes) -> list[bytes]:
    """Values of every record in a fetched record set (decoded with kafka-python)."""
    from kafka.record import MemoryRecords

    out = []
    mr = MemoryRecords(bytes(records))
    while True:
        b = mr.next_batch()
        if b is None:
            return out
        out.extend(r.value for r in b)


def record_offsets_values(records: bytes) -> list[tuple[int, bytes]]:
    """(offset, value) of every record in a fetched record set (decoded with kafka-python)."""
    from kafka.record import MemoryRecords

    out = []
    mr = MemoryRecords(bytes(records))
    while True:
        b = mr.next_batch()
        if b is None:
            return out
        out.extend((r.offset, r.value) for r in b)


# -- Java check programs ------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[2]
JAVA_SRC = Path(__file__).resolve().parent / "java"


def spark_jars_dir() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent / "jars"


def java_classpath(classes: Path) -> str:
    return os.pathsep.join([str(classes), str(KAFKA_CLIENTS_JAR), str(spark_jars_dir() / "*")])


def run_java(classpath: str, main: str, *args: str, timeout: float = 120) -> dict[str, str]:
    """Run a check program; returns its KEY=VALUE output lines as a dict."""
    proc = subprocess.run(["java", "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-cp", classpath,
                           main, *args], capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{main} failed:\n{proc.stdout}\n{proc.stderr[-4000:]}"
    out = {}
    for line in proc.stdout.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            out[key] = value
    return out
