"""The appliance's one DataFrame transformation: Kafka records in, alert/dead-letter records out.

Continuous mode only runs map-like plans (projections and filters: no explode, no union,
no aggregation), so every input record becomes at most ONE output row, whose per-row
``topic`` column sends it to the alerts or the dead-letter topic through a single sink.
Only Catalyst expressions are used (no Python UDF ever runs per record).

Validation reads the raw JSON with the VARIANT functions (``try_parse_json``,
``schema_of_variant``) because ``from_json`` silently turns a wrong type into null.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame
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
from appliance.events import FIELD_NAMES, FIELDS, STRING, STRING_MAP, EventField
from appliance.rules import SEVERITIES, Rule

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

_NUMBER_TYPES = "^(TINYINT|SMALLINT|INT|BIGINT|FLOAT|DOUBLE|DECIMAL)"


def _type_column(name: str) -> str:
    return f"_type_{name}"


def _field_types() -> list[Column]:
    """The JSON type of each event field as ``schema_of_variant`` spells it (``STRING``,
    ``BIGINT``, ``DECIMAL(3,1)``, ``OBJECT<...>``, ``VOID`` for JSON null; SQL null if
    absent), computed once per record in its own projection and referenced below."""
    return [F.expr(f"schema_of_variant(variant_get(_json, '$.{f.name}'))")
            .alias(_type_column(f.name)) for f in FIELDS]


def _absent(name: str) -> Column:
    jtype = F.col(_type_column(name))
    return jtype.isNull() | (jtype == F.lit("VOID"))


def _field_error(field: EventField) -> Column:
    """The reason ``field`` is invalid in this record, or null."""
    if field.json_type == STRING_MAP:
        return _string_map_error(field.name)
    name, kind = field.name, field.json_type
    jtype = F.col(_type_column(name))
    wrong = (jtype != F.lit("STRING")) if kind == STRING else ~jtype.rlike(_NUMBER_TYPES)
    missing = F.lit(f"missing field: {name}") if field.required else F.lit(None)
    return (F.when(_absent(name), missing)
            .when(wrong, F.concat(F.lit(f"wrong type: {name} must be a {kind}, got "),
                                  F.lower(jtype))))


def _string_map_error(name: str) -> Column:
    """A field that, when present, must be a JSON object of string to string (``tags``)."""
    values_ok = F.expr(f"forall(map_values(try_variant_get(_json, '$.{name}', "
                       "'map<string, variant>')), x -> schema_of_variant(x) = 'STRING')")
    not_object = ~F.col(_type_column(name)).startswith("OBJECT")
    return F.when(~_absent(name) & (not_object | ~values_ok),
                  F.lit(f"wrong type: {name} must be an object of string to string"))


def parse_events(records: DataFrame) -> DataFrame:
    """Kafka records -> the same records plus typed event columns and an ``error`` reason.

    Kafka's own columns are renamed with a leading underscore so that rule expressions
    see only the event's fields (``value`` is the metric value, not the Kafka payload).
    Each step is its own projection so that no expensive expression (JSON parse, type
    probe) is evaluated twice for a record.
    """
    kafka = ["_key", "_raw", "_topic", "_partition", "_offset"]
    raw = records.select(
        F.col("key").alias("_key"), F.col("value").alias("_raw"),
        F.col("topic").alias("_topic"), F.col("partition").alias("_partition"),
        F.col("offset").alias("_offset"),
    ).withColumn("_text", F.col("_raw").cast("string"))
    raw = raw.withColumn("_utf8", F.expr("is_valid_utf8(_text)"))
    parsed = raw.select(*kafka, "_utf8",
                        F.expr("CASE WHEN _utf8 THEN try_parse_json(_text) END").alias("_json"))
    probed = parsed.select(*kafka, "_utf8", "_json",
                           F.expr("schema_of_variant(_json)").alias("_type"), *_field_types())
    structural = (
        F.when(F.col("_raw").isNull() | (F.length("_raw") == 0), F.lit("empty value"))
        .when(~F.col("_utf8"), F.lit("not valid UTF-8"))
        .when(F.col("_json").isNull(), F.lit("malformed JSON"))
        .when(~F.col("_type").startswith("OBJECT"), F.lit("not a JSON object"))
    )
    field_errors = [_field_error(f) for f in FIELDS]
    typed = [
        F.expr(f"try_variant_get(_json, '$.{f.name}', '{f.spark_type}')").alias(f.name)
        for f in FIELDS
    ]
    checked = probed.select(*kafka, "_utf8", structural.alias("_structural"),
                            F.concat_ws("; ", *field_errors).alias("_fields"), *typed)
    error = F.coalesce(F.col("_structural"),
                       F.when(F.col("_fields") != F.lit(""), F.col("_fields")))
    return checked.select(*kafka, "_utf8", error.alias("error"),
                          *FIELD_NAMES)


def _matched_rules(rules: Sequence[Rule]) -> Column:
    """Array of {id, severity, message, ordinal} for every rule whose ``when`` is true."""
    candidates = [
        F.when(F.col("error").isNull() & F.coalesce(F.expr(rule.when).cast("boolean"),
                                                    F.lit(False)),
               F.struct(F.lit(rule.id).alias("id"), F.lit(rule.severity).alias("severity"),
                        F.lit(rule.message).alias("message"),
                        F.lit(rule.ordinal).alias("ordinal")))
        for rule in rules
    ]
    return F.filter(F.array(*candidates), lambda r: r.isNotNull())


def _alert_json(matched: Column) -> Column:
    names = F.array(*[F.lit(s) for s in SEVERITIES])
    highest = F.element_at(names, F.array_max(F.transform(matched, lambda r: r["ordinal"])))
    listed = F.transform(matched, lambda r: F.struct(r["id"].alias("id"),
                                                     r["severity"].alias("severity"),
                                                     r["message"].alias("message")))
    return F.to_json(F.struct(
        F.col("event_id").alias("alert_id"), "event_id", "source", "metric", "value", "ts",
        highest.alias("severity"), listed.alias("rules"),
    ))


def _dead_letter_json() -> Column:
    raw = F.when(F.col("_utf8") | F.col("_raw").isNull(), F.col("_raw").cast("string")) \
        .otherwise(F.base64("_raw"))
    encoding = F.when(F.col("_utf8") | F.col("_raw").isNull(), F.lit("utf8")) \
        .otherwise(F.lit("base64"))
    return F.to_json(F.struct(
        F.col("error"), raw.alias("raw"), encoding.alias("encoding"),
        F.col("_topic").alias("topic"), F.col("_partition").alias("partition"),
        F.col("_offset").alias("offset"),
    ), {"ignoreNullFields": "false"})


def route(events: DataFrame, rules: Sequence[Rule], topics: TopicsConfig) -> DataFrame:
    """Parsed events -> rows ``key, value, topic`` for the Kafka sink (one per record at most).

    Valid events matching no rule are dropped by the final ``where``.
    """
    with_matches = events.withColumn("_matched", _matched_rules(rules))
    is_alert = F.col("error").isNull() & (F.size("_matched") > 0)
    topic = (F.when(F.col("error").isNotNull(), F.lit(topics.dead_letters))
             .when(is_alert, F.lit(topics.alerts)))
    value = F.when(F.col("error").isNotNull(), _dead_letter_json()) \
        .otherwise(_alert_json(F.col("_matched")))
    key = F.when(is_alert, F.col("event_id").cast("binary")).otherwise(F.col("_key"))
    return with_matches.select(key.alias("key"), value.alias("value"), topic.alias("topic")) \
        .where(F.col("topic").isNotNull())


def transform(records: DataFrame, rules: Sequence[Rule], topics: TopicsConfig) -> DataFrame:
    """Kafka read schema in, Kafka write schema (``key, value, topic``) out."""
    return route(parse_events(records), rules, topics)
