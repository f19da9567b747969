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

from pyspark.sql import DataFrame, SparkSession

from appliance import logs
from appliance.config import TopicsConfig
from appliance.pipeline import transform
from appliance.rules import Rule
from appliance.topics import end_offsets, offsets_consumer

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


# Synthetic event JSON, built by Spark itself (no Python worker, no driver-side list): 10%
# match the warm-up rule, 2% are bad records (each dead-letter reason), the rest valid
# events over a spread of metrics and values.
_EVENT_JSON = """to_json(named_struct(
    'event_id', concat('warmup-', id), 'ts', 1.7e12 + id,
    'source', CASE WHEN id % 10 = 3 THEN 'appliance-warmup-alert'
                   ELSE concat('warmup-', id % 17) END,
    'metric', element_at(array('cpu.util', 'mem.used_pct', 'disk.used_pct', 'net.rx',
                               'load.1m'), CAST(id % 5 + 1 AS INT)),
    'value', CAST(id % 100 AS DOUBLE),
    'tags', map('env', 'warmup', 'dc', CAST(id % 3 AS STRING))))"""
_BAD_VALUE = """element_at(array(
    CAST('{"event_id": "w' AS BINARY), CAST('{"ts": 1}' AS BINARY), CAST('[1, 2]' AS BINARY),
    unhex('FFFE'),
    CAST('{"event_id": 1, "ts": 1, "source": "s", "metric": "m", "value": "x"}' AS BINARY)),
    CAST(id % 5 + 1 AS INT))"""


def synthetic_records(spark: SparkSession, count: int) -> DataFrame:
    """``count`` synthetic records in the Kafka read schema (see _EVENT_JSON)."""
    value = f"CASE WHEN id % 50 = 7 THEN {_BAD_VALUE} ELSE CAST({_EVENT_JSON} AS BINARY) END"
    return spark.range(count).selectExpr(
        "CAST(NULL AS BINARY) AS key", f"{value} AS value", "'appliance-warmup' AS topic",
        "CAST(id % 2 AS INT) AS partition", "id AS offset",
        "CAST(NULL AS TIMESTAMP) AS timestamp", "0 AS timestampType")


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
    plan_rules = [*rules, WARMUP_RULE]
    mode = "memory" if topic is None else "kafka"
    out_topics = TopicsConfig(events=topic or "appliance-warmup",
                              alerts=topic or "appliance-warmup",
                              dead_letters=topic or "appliance-warmup")
    if topic is not None:
        # The synthetic input, written once with the sink's own options (warms the producer);
        # each round re-reads exactly that range (the topic may hold older runs' records, and
        # each round appends its own outputs behind it).
        consumer = offsets_consumer(client)
        try:
            before = end_offsets(consumer, [topic])[topic]
            raw = synthetic_records(spark, RECORDS_PER_ROUND).select("key", "value")
            raw.write.format("appliance-kafka").mode("append").options(**sink_options) \
                .option("topic", topic).save()
            after = end_offsets(consumer, [topic])[topic]
        finally:
            consumer.close()
        start_json, end_json = _offsets_json(before, topic), _offsets_json(after, topic)
    rounds = 0
    while rounds < MAX_ROUNDS and (rounds == 0 or time.monotonic() - started < budget_s):
        if topic is None:
            records = synthetic_records(spark, RECORDS_PER_ROUND)
            transform(records, plan_rules, out_topics).write.format("noop") \
                .mode("overwrite").save()
        else:
            records = (spark.read.format("appliance-kafka").options(**source_options)
                       .option("subscribe", topic).option("startingOffsets", start_json)
                       .option("endingOffsets", end_json).load())
            transform(records, plan_rules, out_topics).write.format("appliance-kafka") \
                .mode("append").options(**sink_options).save()
        rounds += 1
    result = WarmupResult(mode=mode, rounds=rounds, records=rounds * RECORDS_PER_ROUND,
                          seconds=round(time.monotonic() - started, 2))
    log.info("warmup.done", mode=result.mode, rounds=result.rounds, records=result.records,
             seconds=result.seconds)
    return result
