"""The appliance's one DataFrame transformation: Kafka records in, alert/dead-letter records out.

Continuous mode only runs map-like plans (projections and filters: no explode, no union,
no aggregation), so every input record becomes at most ONE output row, whose per-row
``topic`` column sends it to the alerts or the dead-letter topic through a single sink.
Only Catalyst expressions are used (no Python UDF ever runs per record).

No Python lambdas either (``F.filter``/``F.transform``): PySpark names each lambda
variable ``x_<n>`` from a JVM-wide counter, Spark's generated code carries that name in a
comment, and its class cache is keyed by the code's text. So every planning of the same
rules generated and compiled new classes, and the warm-up (``appliance.query.warmup``) JIT-compiled
classes the real query never ran. The higher-order functions below use built-ins without
lambdas or a SQL lambda, whose variable keeps the name written.

Validation is one Java expression from the connector jar (``parse_events``). Built from
Spark's JSON functions, which stop after the first value (``from_json``, ``parse_json``)
or turn a wrong type into null (``from_json``), it walked each record three times.
"""

from __future__ import annotations

from typing import Protocol

from py4j.java_gateway import JavaObject
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from appliance.config import TopicsConfig
from appliance.connector import driver_jvm
from appliance.events import FIELD_NAMES, FIELDS
from appliance.query.alert_headers import (
    RULES_VERSION_HEADER,
    SEVERITY_HEADER,
    SOURCE_TIMESTAMP_HEADER,
)
from appliance.rules.rules_file import SEVERITIES

# The columns of the Kafka source (Spark's built-in ``kafka`` format has the same).
KAFKA_READ_SCHEMA = StructType([
    StructField("key", BinaryType()),
    StructField("value", BinaryType()),
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("offset", LongType()),
    StructField("timestamp", TimestampType()),
    StructField("timestampType", IntegerType()),
])

def event_reader(spark: SparkSession) -> JavaObject:
    """The connector's one-pass record reader (``io.appliance.events.EventReader``) for the
    event table (``appliance.events.FIELDS``): names, JSON types, required flags."""
    return driver_jvm(spark).io.appliance.events.EventReader.create(
        [f.name for f in FIELDS], [f.json_type for f in FIELDS], [f.required for f in FIELDS])


def parse_events(records: DataFrame) -> DataFrame:
    """Kafka records -> the same records plus typed event columns and an ``error`` reason.

    Kafka's own columns are renamed with a leading underscore so that rule expressions
    see only the event's fields (``value`` is the metric value, not the Kafka payload).

    This runs once per record on the query's hot path, so each record's bytes are read
    once: ``EventReader`` (a Java expression from the connector jar, called directly by
    the generated code) walks the JSON a single time and yields the reason the record is
    a dead letter (null for a valid event), whether it is UTF-8 (the dead letter's
    ``encoding``), and the typed fields of a valid event. Its verdicts and reasons are those
    of Spark's own parsers (docs/appliance.md, "Records"). The read is a projection of its
    own, referenced by the next one, so it runs once per record (Catalyst does not inline
    an expensive expression referenced several times).
    """
    kafka = ["_key", "_raw", "_topic", "_partition", "_offset", "_timestamp"]
    raw = records.select(
        F.col("key").alias("_key"), F.col("value").alias("_raw"),
        F.col("topic").alias("_topic"), F.col("partition").alias("_partition"),
        F.col("offset").alias("_offset"), F.col("timestamp").alias("_timestamp"),
    )
    reader = event_reader(records.sparkSession)
    read = raw.select(*kafka, Column(reader.column(F.col("_raw")._jc)).alias("_read"))
    return read.select(*kafka, F.col("_read.utf8").alias("_utf8"),
                       F.col("_read.error").alias("error"),
                       *[F.col("_read")[name].alias(name) for name in FIELD_NAMES])


class RuleEvaluation(Protocol):
    """What ``route`` asks of the rules: their verdict on an event, as a column.

    ``appliance.rules.rule_book.RuleBook`` (what the appliance runs) and
    ``appliance.rules.naive_rules.NaiveRules`` (the reference) both answer it.
    """

    def column(self, event: Column) -> Column:
        """``struct<version string, rules array<struct<id, severity, message, ordinal>>>``
        for ``event``, a struct of the event's fields (``FIELD_NAMES`` order)."""
        ...


def _highest_severity(matched: Column) -> Column:
    names = F.array(*[F.lit(s) for s in SEVERITIES])
    return F.element_at(names, F.array_max(matched["ordinal"]))


def _alert_headers(version: Column, latency: bool) -> Column:
    """The alert record's headers: the rules version, and with ``latency`` what the
    appliance's in-band latency observer reads (the source event record's Kafka timestamp,
    epoch ms as ASCII decimal, and the alert's severity)."""
    headers = [F.struct(F.lit(RULES_VERSION_HEADER).alias("key"),
                        version.cast("binary").alias("value"))]
    if latency:
        source_ms = F.expr("unix_millis(_timestamp)").cast("string").cast("binary")
        headers += [
            F.struct(F.lit(SOURCE_TIMESTAMP_HEADER).alias("key"), source_ms.alias("value")),
            F.struct(F.lit(SEVERITY_HEADER).alias("key"),
                     F.col("_severity").cast("binary").alias("value")),
        ]
    return F.array(*headers)


def _alert_json(matched: str, version: Column) -> Column:
    """The alert record's JSON; ``matched``: the name of the matched rules' array column;
    ``version``: the rules version that raised it."""
    listed = F.expr(f"transform({matched}, r -> named_struct("
                    "'id', r.id, 'severity', r.severity, 'message', r.message))")
    return F.to_json(F.struct(
        F.col("event_id").alias("alert_id"), "event_id", "source", "metric", "value", "ts",
        F.col("_severity").alias("severity"), listed.alias("rules"),
        version.alias("rules_version"),
    ))


#: Kafka refuses records over ~1 MiB by default (producer ``max.request.size``, topic
#: ``max.message.bytes``), and one refused write kills the query, whose restart replays the
#: same record: a poison pill. So no output may come near that: a dead letter carries at
#: most ``MAX_RAW_BYTES`` of the record (base64, worst case 4/3 of it), and an alert larger
#: than ``MAX_ALERT_BYTES`` becomes a dead letter instead.
MAX_RAW_BYTES = 131072
MAX_ALERT_BYTES = 960000


def _dead_letter_json() -> Column:
    raw_bytes = F.expr("octet_length(_raw)")
    truncated = F.coalesce(raw_bytes > F.lit(MAX_RAW_BYTES), F.lit(False))
    as_text = (F.col("_utf8") | F.col("_raw").isNull()) & ~truncated
    kept = F.expr(f"substring(_raw, 1, {MAX_RAW_BYTES})")
    raw = F.when(as_text, F.col("_raw").cast("string")).otherwise(F.base64(kept))
    encoding = F.when(as_text, F.lit("utf8")).otherwise(F.lit("base64"))
    error = F.when(truncated, F.concat(
        F.col("error"), F.lit(f"; raw truncated to the first {MAX_RAW_BYTES} of "),
        raw_bytes.cast("string"), F.lit(" bytes"))).otherwise(F.col("error"))
    return F.to_json(F.struct(
        error.alias("error"), raw.alias("raw"), encoding.alias("encoding"),
        F.col("_topic").alias("topic"), F.col("_partition").alias("partition"),
        F.col("_offset").alias("offset"),
    ), {"ignoreNullFields": "false"})


def route(events: DataFrame, rules: RuleEvaluation, topics: TopicsConfig,
          latency_headers: bool = True) -> DataFrame:
    """Parsed events -> rows ``key, value, topic, headers`` for the Kafka sink (one per
    record at most).

    The rules are evaluated once per valid event, in a projection of their own (``_match``,
    referenced by the later ones). Valid events matching no rule are dropped by the final
    ``where``. Each alert carries the rules version that raised it as a header and, with
    ``latency_headers``, the headers the in-band latency metric reads
    (``appliance.observability.alert_latency``); dead letters carry none.
    """
    event = F.struct(*[F.col(name) for name in FIELD_NAMES])
    matched = events.withColumn("_match", F.when(F.col("error").isNull(), rules.column(event)))
    flat = matched.select("*", F.col("_match.rules").alias("_matched"),
                          F.col("_match.version").alias("_version")).drop("_match")
    # Its own projection: the severity is used by both the JSON and a header.
    with_matches = flat.withColumn("_severity", _highest_severity(F.col("_matched")))
    has_match = F.col("error").isNull() & (F.size("_matched") > 0)
    with_alert = with_matches.withColumn(
        "_alert", F.when(has_match, _alert_json("_matched", F.col("_version"))))
    alert_bytes = F.expr("octet_length(_alert)")
    oversize = F.when(alert_bytes > F.lit(MAX_ALERT_BYTES), F.concat(
        F.lit("alert too large: "), alert_bytes.cast("string"),
        F.lit(f" bytes (limit {MAX_ALERT_BYTES})")))
    checked = with_alert.withColumn("error", F.coalesce(F.col("error"), oversize))
    is_alert = F.col("error").isNull() & F.col("_alert").isNotNull()
    topic = (F.when(F.col("error").isNotNull(), F.lit(topics.dead_letters))
             .when(is_alert, F.lit(topics.alerts)))
    value = F.when(F.col("error").isNotNull(), _dead_letter_json()).otherwise(F.col("_alert"))
    key = F.when(is_alert, F.col("event_id").cast("binary")).otherwise(F.col("_key"))
    columns = [key.alias("key"), value.alias("value"), topic.alias("topic"),
               F.when(is_alert, _alert_headers(F.col("_version"), latency_headers))
               .alias("headers")]
    # Catalyst pushes a filter down through deterministic projections by inlining them: the
    # condition ``topic IS NOT NULL`` would then carry its own copy of the whole parse,
    # rule evaluation and alert JSON, computed a second time for every record (measured:
    # throughput / 10). A nondeterministic column in the routed projection, referenced by
    # the filter, keeps the filter above it; spark_partition_id() is never negative.
    routed = checked.select(*columns, F.spark_partition_id().alias("_partition_id"))
    kept = routed.where(F.col("topic").isNotNull() & (F.col("_partition_id") >= F.lit(0)))
    return kept.drop("_partition_id")


def transform(records: DataFrame, rules: RuleEvaluation, topics: TopicsConfig,
              latency_headers: bool = True) -> DataFrame:
    """Kafka read schema in, Kafka write schema (``key, value, topic, headers``) out."""
    return route(parse_events(records), rules, topics, latency_headers)
