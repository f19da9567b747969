"""Warm the query's code paths on synthetic records before the appliance says it is ready.

Why: a fresh JVM runs the record path interpreted, loads classes on first use and compiles
Spark's generated code, so a freshly started query answered its first ~15 s of events
100-1000x slower than in its steady state (measured by ``bench/appliance_latency.py``):
every deploy, rule change and crash restart cost seconds of late alerts. Running the exact
transformation (same rules, same expressions, same sink options) over synthetic records a
few times lets the JIT compile the hot paths (JSON/variant parsing, the rule predicates,
alert and dead-letter JSON, the connector's row conversion and producer) before a real
event arrives, and leaves the sink's shared producer created and connected in
``ProducerCache`` for the real query's writers.

Where the synthetic records go: through Kafka when a warm-up topic is usable (the embedded
broker creates it; on an external cluster only if the operator created it), so the
connector's reader and sink are warmed too; otherwise the plan runs from memory into
Spark's ``noop`` sink. Synthetic records never touch the events, alerts or dead-letter
topics.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass

from kafka import KafkaConsumer
from pyspark.sql import DataFrame, SparkSession

from appliance import logs
from appliance.config import TopicsConfig
from appliance.pipeline import KAFKA_READ_SCHEMA, transform
from appliance.rules import Rule
from appliance.topics import end_offsets

log = logs.get_logger("appliance.warmup")

RECORDS_PER_ROUND = 5000
MAX_ROUNDS = 8
# Wall-clock budget: rounds stop once it is spent (the JIT has mostly compiled the record
# path after ~20-40k records; more rounds only delay ``ready``).
BUDGET_S = 4.0
# Matches every synthetic "alert" record, so the alert-JSON path is compiled too whatever
# the operator's rules are; it exists only in the warm-up plan.
WARMUP_RULE = Rule(id="appliance-warmup", severity="info",
                   when="source = 'appliance-warmup-alert'", message="warm-up")


@dataclass(frozen=True)
class WarmupResult:
    mode: str          # "kafka" (reader + plan + sink) or "memory" (plan only, noop sink)
    rounds: int
    records: int
    seconds: float


def synthetic_values(count: int) -> list[bytes]:
    """Event JSON like production's: 10% match the warm-up rule, 2% are bad records (each
    dead-letter reason), the rest valid events over a spread of metrics and values."""
    metrics = ("cpu.util", "mem.used_pct", "disk.used_pct", "net.rx", "load.1m")
    out: list[bytes] = []
    for i in range(count):
        if i % 50 == 7:
            out.append((b'{"event_id": "w', b'{"ts": 1}', b'[1, 2]', b'\xff\xfe',
                        b'{"event_id": 1, "ts": 1, "source": "s", "metric": "m", '
                        b'"value": "x"}')[i % 5])
            continue
        source = "appliance-warmup-alert" if i % 10 == 3 else f"warmup-{i % 17}"
        doc = {"event_id": f"warmup-{i}", "ts": 1.7e12 + i, "source": source,
               "metric": metrics[i % len(metrics)], "value": float(i % 100)}
        if i % 4 == 0:
            doc["tags"] = {"env": "warmup", "dc": str(i % 3)}
        out.append(json.dumps(doc).encode())
    return out


def _memory_records(spark: SparkSession, values: Sequence[bytes]) -> DataFrame:
    rows = [(None, v, "appliance-warmup", i % 2, i, None, 0) for i, v in enumerate(values)]
    return spark.createDataFrame(rows, KAFKA_READ_SCHEMA)


def _offsets_json(offsets: dict[int, int], topic: str) -> str:
    return json.dumps({topic: {str(p): o for p, o in offsets.items()}})


def warm_up(spark: SparkSession, rules: Sequence[Rule], topic: str | None, client: dict,
            source_options: dict[str, str], sink_options: dict[str, str],
            budget_s: float = BUDGET_S) -> WarmupResult:
    """Run the query's transformation over synthetic records until ``budget_s`` is spent.

    ``topic``: a warm-up topic on the appliance's Kafka (None: plan only, from memory);
    ``client``: kafka-python settings to read its end offsets with.
    ``source_options``/``sink_options``: the real query's connector options (incl.
    ``kafka.bootstrap.servers``), so the cached producer is the one the query will use.
    """
    started = time.monotonic()
    values = synthetic_values(RECORDS_PER_ROUND)
    plan_rules = [*rules, WARMUP_RULE]
    mode = "memory" if topic is None else "kafka"
    out_topics = TopicsConfig(events=topic or "appliance-warmup",
                              alerts=topic or "appliance-warmup",
                              dead_letters=topic or "appliance-warmup")
    if topic is not None:
        # The synthetic input, written once with the sink's own options (warms the producer);
        # each round re-reads exactly that range (the topic may hold older runs' records, and
        # each round appends its own outputs behind it).
        consumer = KafkaConsumer(**client)
        try:
            before = end_offsets(consumer, [topic])[topic]
            raw = _memory_records(spark, values).select("key", "value")
            raw.write.format("appliance-kafka").mode("append").options(**sink_options) \
                .option("topic", topic).save()
            after = end_offsets(consumer, [topic])[topic]
        finally:
            consumer.close()
        start_json, end_json = _offsets_json(before, topic), _offsets_json(after, topic)
    rounds = 0
    while rounds < MAX_ROUNDS and (rounds == 0 or time.monotonic() - started < budget_s):
        if topic is None:
            records = _memory_records(spark, values)
            transform(records, plan_rules, out_topics).write.format("noop") \
                .mode("overwrite").save()
        else:
            records = (spark.read.format("appliance-kafka").options(**source_options)
                       .option("subscribe", topic).option("startingOffsets", start_json)
                       .option("endingOffsets", end_json).load())
            transform(records, plan_rules, out_topics).write.format("appliance-kafka") \
                .mode("append").options(**sink_options).save()
        rounds += 1
    result = WarmupResult(mode=mode, rounds=rounds, records=rounds * len(values),
                          seconds=round(time.monotonic() - started, 2))
    log.info("warmup.done", mode=result.mode, rounds=result.rounds, records=result.records,
             seconds=result.seconds)
    return result
