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
topics. A micro-batch query plans every batch again, so through Kafka its warm-up can end
with streaming micro-batches of the query over the same records (``StreamWarmup``,
``[query] warmup_batches``).
"""

from __future__ import annotations

import json
import tempfile
import time
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession

from appliance import logs
from appliance.config import TopicsConfig
from appliance.connector import CONNECTOR_FORMAT
from appliance.query.pipeline import transform
from appliance.query.stream_query import StreamSpec, stream_writer
from appliance.rules.rule_book import CompiledRules, RuleBook
from appliance.rules.rules_file import Rule, RuleSet
from appliance.topics import end_offsets, offsets_consumer

log = logs.get_logger("appliance.warmup")

RECORDS_PER_ROUND = 20_000
# Records through the query's plan before ready. Spark caches generated classes by their
# source, and literals (topic names, the rule book's handle) are references, not source, nor
# are names that change per planning (appliance.query.pipeline has no Python lambdas); the
# rules are data in a rule book, not code: so the warm-up's classes are the ones the query
# runs, and their JIT-compiled code is ready for the first real event (``appliance.ready``
# logs ``query_new_classes``).
# 5,000 records left the hot loop interpreted or in C1: at 10,000 events/s its C2
# compilations (1-3 s each on 2 cores) landed on real events and built seconds of backlog
# (bench/appliance_latency.py, docs/bench/appliance-latency.md).
MIN_RECORDS = 40_000
MAX_ROUNDS = 8
# Wall-clock budget from the warm-up's start: more rounds while it lasts (the first
# round, with class loading and the synthetic write, usually spends it on its own).
BUDGET_S = 4.0
# Matches every synthetic "alert" record, so the alert-JSON path is loaded and run whatever
# the operator's rules are: the warm-up's own rule book holds the query's compiled rules and
# this one after them (the plan is the query's either way: the book is data).
WARMUP_RULE = Rule(id="appliance-warmup", severity="info",
                   when="source = 'appliance-warmup-alert'", message="warm-up")


@dataclass(frozen=True)
class WarmupResult:
    mode: str          # "kafka" (reader + plan + sink) or "memory" (plan only, noop sink)
    rounds: int
    seconds: float
    round_seconds: tuple[float, ...]
    stream_batches: int = 0  # micro-batches of the streaming warm-up (StreamWarmup)

    @property
    def records(self) -> int:
        return self.rounds * RECORDS_PER_ROUND


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
# One of each dead-letter reason in turn. The bad records are ids 7, 57, 107, ... (id % 50
# = 7), so the choice goes by id DIV 50: by id % 5 it was always the third ('[1, 2]').
_BAD_VALUE = """element_at(array(
    CAST('{"event_id": "w' AS BINARY), CAST('{"ts": 1}' AS BINARY), CAST('[1, 2]' AS BINARY),
    unhex('FFFE'),
    CAST('{"event_id": 1, "ts": 1, "source": "s", "metric": "m", "value": "x"}' AS BINARY)),
    CAST(id DIV 50 % 5 + 1 AS INT))"""


def synthetic_records(spark: SparkSession, count: int) -> DataFrame:
    """``count`` synthetic records in the Kafka read schema (see _EVENT_JSON)."""
    value = f"CASE WHEN id % 50 = 7 THEN {_BAD_VALUE} ELSE CAST({_EVENT_JSON} AS BINARY) END"
    return spark.range(count).selectExpr(
        "CAST(NULL AS BINARY) AS key", f"{value} AS value", "'appliance-warmup' AS topic",
        "CAST(id % 2 AS INT) AS partition", "id AS offset",
        "CAST(NULL AS TIMESTAMP) AS timestamp", "0 AS timestampType")


def _offsets_json(offsets: dict[int, int], topic: str) -> str:
    return json.dumps({topic: {str(p): o for p, o in offsets.items()}})


@dataclass(frozen=True)
class StreamWarmup:
    """Micro-batches of a streaming query over the synthetic records, after the rounds.

    Why: a micro-batch query plans every batch again (analysis, ~100 optimizer rules,
    physical planning, the stage's Java source), which a batch round warms once per round.
    These batches run the query's own trigger mode, options and sink on the warm-up topic,
    so the planner, the offset and commit logs and the micro-batch loop are compiled before
    ``ready`` (``TriggerMode.plans_every_batch``). Measured at 10,000 events/s
    (bench.appliance_latency, six runs each): 12 batches took the first minute's p99 from
    ~730 to ~540 ms, most of the first seconds' tail is left (per-second p99s of 500-800 ms
    still), and ``ready`` came ~2 s later; so it is off by default.
    """

    # DataStreamWriter.trigger keywords: the query's trigger without its interval (an
    # interval only adds waiting between batches; the planning is the same).
    trigger: dict[str, str]
    output_mode: str               # the query's (TriggerMode.output_mode)
    query_options: dict[str, str]  # the query's writer options (async progress...)
    batches: int                   # [query] warmup_batches
    timeout_s: float = 60.0        # a bound, never reached when the broker answers


@dataclass(frozen=True)
class WarmupPlan:
    """How much to warm a fresh JVM before ``ready``."""

    min_records: int = MIN_RECORDS
    max_rounds: int = MAX_ROUNDS
    budget_s: float = BUDGET_S
    # Streaming micro-batches after the rounds (Kafka mode only), or None.
    stream: StreamWarmup | None = None


START = WarmupPlan()


def warm_up(spark: SparkSession, rules: CompiledRules, topic: str | None, client: dict,
            source_options: dict[str, str], sink_options: dict[str, str],
            latency_headers: bool, plan: WarmupPlan = START) -> WarmupResult:
    """Run the query's transformation over synthetic records for at least
    ``plan.min_records`` records, then more rounds until ``plan.budget_s`` is spent (at most
    ``plan.max_rounds`` in all), under the query's compiled ``rules`` plus ``WARMUP_RULE``
    (a rule book of the warm-up's own).

    ``topic``: a warm-up topic on the appliance's Kafka (None: plan only, from memory);
    ``client``: kafka-python settings to read its end offsets with.
    ``source_options``/``sink_options``: the real query's connector options (incl.
    ``kafka.bootstrap.servers``), so the cached producer is the one the query will use.
    ``latency_headers``: as the query's ``transform`` gets it (part of the exact plan).
    """
    started = time.monotonic()
    book = RuleBook(spark)
    try:
        book.publish(rules.plus(book.compile(RuleSet.of([WARMUP_RULE]))))
        return _warm_up(spark, book, topic, client, source_options, sink_options,
                        latency_headers, plan, started)
    finally:
        book.close()


def _warm_up(spark: SparkSession, book: RuleBook, topic: str | None, client: dict,
             source_options: dict[str, str], sink_options: dict[str, str],
             latency_headers: bool, plan: WarmupPlan, started: float) -> WarmupResult:
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
            raw.write.format(CONNECTOR_FORMAT).mode("append").options(**sink_options) \
                .option("topic", topic).save()
            after = end_offsets(consumer, [topic])[topic]
        finally:
            consumer.close()
        start_json, end_json = _offsets_json(before, topic), _offsets_json(after, topic)
        records = (spark.read.format(CONNECTOR_FORMAT).options(**source_options)
                   .option("subscribe", topic).option("startingOffsets", start_json)
                   .option("endingOffsets", end_json).load())
    else:
        records = synthetic_records(spark, RECORDS_PER_ROUND)
    # Every round shares one DataFrame, analysed once: a round is then the records' time,
    # not the plan's analysis again (from memory: 0.45 s a round instead of 1.0).
    output = transform(records, book, out_topics, latency_headers)

    def run() -> None:
        if topic is None:
            output.write.format("noop").mode("overwrite").save()
        else:
            output.write.format(CONNECTOR_FORMAT).mode("append").options(**sink_options).save()

    rounds, round_seconds = 0, []
    while rounds < plan.max_rounds and (
            rounds * RECORDS_PER_ROUND < plan.min_records
            or time.monotonic() - started < plan.budget_s):
        round_started = time.monotonic()
        run()
        rounds += 1
        round_seconds.append(round(time.monotonic() - round_started, 2))
    stream_batches = 0
    if plan.stream is not None and topic is None:
        log.warning("warmup.stream_skipped", wanted=plan.stream.batches,
                    reason="no warm-up topic: streaming batches need Kafka")
    elif plan.stream is not None and topic is not None:
        stream_batches = _stream(spark, book, topic, start_json, out_topics,
                                 source_options, sink_options, latency_headers, plan.stream)
    result = WarmupResult(mode=mode, rounds=rounds,
                          seconds=round(time.monotonic() - started, 2),
                          round_seconds=tuple(round_seconds), stream_batches=stream_batches)
    log.info("warmup.done", mode=result.mode, rounds=result.rounds, records=result.records,
             seconds=result.seconds, round_seconds=list(result.round_seconds),
             stream_batches=stream_batches)
    return result


def _stream(spark: SparkSession, rules: RuleBook, topic: str, start_json: str,
            out_topics: TopicsConfig, source_options: dict[str, str],
            sink_options: dict[str, str], latency_headers: bool, stream: StreamWarmup) -> int:
    """Run ``stream.batches`` micro-batches of the exact query over the synthetic records
    (from ``start_json`` on ``topic``, outputs back to it); returns the batches that had
    records. The checkpoint is a throw-away directory."""
    per_batch = max(RECORDS_PER_ROUND // stream.batches, 1)
    with tempfile.TemporaryDirectory(prefix="appliance-warmup-checkpoint-") as checkpoint:
        # The warm-up's topic and range win over any [source] option of the operator's.
        spec = StreamSpec(
            name="appliance-warmup",
            reader_options={**source_options, "subscribe": topic, "startingOffsets": start_json,
                            "maxOffsetsPerTrigger": str(per_batch)},
            writer_options={**sink_options, **stream.query_options}, checkpoint=checkpoint,
            output_mode=stream.output_mode, trigger=stream.trigger, topics=out_topics,
            latency_headers=latency_headers)
        query = stream_writer(spark, rules, spec).start()
        deadline, done = time.monotonic() + stream.timeout_s, 0
        try:
            while done < stream.batches and time.monotonic() < deadline:
                if query.exception() is not None:
                    break
                done = sum(1 for p in query.recentProgress if p.get("numInputRows", 0) > 0)
                time.sleep(0.05)
        finally:
            query.stop()
    if done < stream.batches:
        log.warning("warmup.stream_short", batches=done, wanted=stream.batches,
                    error=str(query.exception() or "timeout")[:500])
    return done
