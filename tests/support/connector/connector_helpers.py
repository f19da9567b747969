"""Kafka I/O for the connector tests: produce known records, read a topic back, wait for a
query. Real clients (kafka-python) against the real embedded broker; every wait is bounded."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pyspark
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

DEADLINE_S = 90.0
JAVA_SRC = Path(__file__).resolve().parents[2] / "connector" / "java"
SPARK_HOME = Path(pyspark.__file__).resolve().parent


def spark_jars() -> list[str]:
    """pyspark's jars as one classpath wildcard entry (javac and java expand it)."""
    return [str(SPARK_HOME / "jars" / "*")]


@dataclass(frozen=True)
class JavaChecks:
    """The compiled tests/connector/java programs."""

    classes: Path
    app_jar: Path
    classpath: list[str]

    def run(self, main: str, *args: str, timeout: float = 180) -> dict[str, str]:
        """Runs ``main`` on a plain JVM; returns {check: "PASS" | "FAIL: why"}."""
        cmd = ["java", "-cp", os.pathsep.join(self.classpath), f"io.appliance.kafka.{main}", *args]
        return _results(subprocess.run(cmd, capture_output=True, text=True, timeout=timeout))

    def submit(self, main: str, *args: str, conf: dict[str, str],
               timeout: float = 300) -> dict[str, str]:
        """Runs ``main`` through pyspark's spark-submit (local[1]) with ``conf``, as an
        operator runs a query: spark.* settings go through Spark's own launcher."""
        cmd = [str(Path(sys.executable).parent / "spark-submit"), "--master", "local[1]",
               "--conf", "spark.ui.enabled=false",
               "--conf", "spark.driver.bindAddress=127.0.0.1",
               "--conf", "spark.driver.host=127.0.0.1",
               "--driver-class-path", os.pathsep.join(self.classpath[:-1])]
        for key, value in conf.items():
            cmd += ["--conf", f"{key}={value}"]
        cmd += ["--class", f"io.appliance.kafka.{main}", str(self.app_jar), *args]
        env = {**os.environ, "SPARK_HOME": str(SPARK_HOME)}
        return _results(subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                                       env=env))


def _results(proc: subprocess.CompletedProcess) -> dict[str, str]:
    """Parses "PASS <check>" / "FAIL <check>: <why>" lines; the program must have finished."""
    out: dict[str, str] = {}
    for line in proc.stdout.splitlines():
        verdict, _, rest = line.partition(" ")
        if verdict == "PASS":
            out[rest.strip()] = "PASS"
        elif verdict == "FAIL":
            name, _, why = rest.partition(":")
            out[name.strip()] = "FAIL:" + why
    tail = proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "ALL PASSED" in proc.stdout or "FAILED" in proc.stdout, (
        f"check program did not finish (rc={proc.returncode}):\n{tail}")
    if proc.returncode != 0 and "FAILED" not in proc.stdout:
        raise AssertionError(f"check program exited {proc.returncode}:\n{tail}")
    return out


@dataclass(frozen=True)
class Rec:
    key: bytes | None
    value: bytes
    headers: tuple


def produce(bootstrap: str, topic: str, tag: str, count: int, partitions: int = 2,
            start: int = 0) -> list[Rec]:
    """Sends ``count`` records round-robin over ``partitions`` with keys and headers."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    sent = []
    try:
        for i in range(start, start + count):
            rec = Rec(key=f"{tag}-k{i}".encode(), value=f"{tag}-v{i}".encode(),
                      headers=(("h1", f"{tag}-{i}".encode()), ("h2", b"\x00\xff")))
            producer.send(topic, key=rec.key, value=rec.value, headers=list(rec.headers),
                          partition=i % partitions)
            sent.append(rec)
        producer.flush(timeout=30)
    finally:
        producer.close(timeout=10)
    return sent


def read_topic(bootstrap: str, topic: str, partitions: int = 2) -> list[Rec]:
    """Everything currently in ``topic`` (reads up to the end offsets seen at call time)."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                             enable_auto_commit=False, consumer_timeout_ms=1000)
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        ends = consumer.end_offsets(tps)
        out: list[Rec] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if all(consumer.position(tp) >= ends[tp] for tp in tps):
                break
            for recs in consumer.poll(timeout_ms=200).values():
                out += [Rec(r.key, r.value, tuple((k, v) for k, v in r.headers)) for r in recs]
        return out
    finally:
        consumer.close()


def wait_for_records(bootstrap: str, topic: str, expected: list[Rec], query=None,
                     partitions: int = 2, deadline_s: float = DEADLINE_S) -> list[Rec]:
    """Polls ``topic`` until every expected record is there (duplicates allowed)."""
    want = set(expected)
    deadline = time.monotonic() + deadline_s
    got: list[Rec] = []
    while time.monotonic() < deadline:
        got = read_topic(bootstrap, topic, partitions)
        if want <= set(got):
            return got
        if query is not None and query.exception() is not None:
            raise AssertionError(f"query failed: {query.exception()}")
        time.sleep(0.3)
    missing = want - set(got)
    raise AssertionError(f"{len(missing)} of {len(want)} records missing from {topic}, "
                         f"e.g. {sorted(missing, key=lambda r: r.value)[:3]}")


def wait_until(predicate, what: str, deadline_s: float = DEADLINE_S, query=None) -> None:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if predicate():
            return
        if query is not None and query.exception() is not None:
            raise AssertionError(f"query failed while waiting for {what}: {query.exception()}")
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def rows_as_recs(rows) -> list[Rec]:
    """Rows of the read schema (with includeHeaders=true) as comparable records."""
    return [Rec(bytes(r["key"]) if r["key"] is not None else None, bytes(r["value"]),
                tuple((h["key"], bytes(h["value"])) for h in (r["headers"] or [])))
            for r in rows]
