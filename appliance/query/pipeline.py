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

Validation reads the raw JSON with the VARIANT functions (``try_parse_json``,
``schema_of_variant``) because ``from_json`` silently turns a wrong type into null; once a
record's types are known to be right, one ``from_json`` reads its typed values.
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
from appliance.query.alert_headers import (
    RULES_VERSION_HEADER,
    SEVERITY_HEADER,
    SOURCE_TIMESTAMP_HEADER,
)
from appliance.query.events import (
    EVENT_DDL,
    FIELD_NAMES,
    FIELDS,
    NUMBER,
    STRING,
    STRING_MAP,
    EventField,
)
from appliance.query.rules import SEVERITIES, Rule, RuleSet

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

# ``schema_of_variant`` names of JSON numbers (a decimal also carries its precision and
# scale: ``DECIMAL(3,1)``). Compared as plain strings, not a regex: this runs per field per
# record.
_NUMBER_TYPES = ("TINYINT", "SMALLINT", "INT", "BIGINT", "FLOAT", "DOUBLE")
_DECIMAL = "DECIMAL"

# JSON's own whitespace (RFC 8259), the only characters a parser skips before a value.
_JSON_WHITESPACE = " \t\n\r"


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
    if kind == STRING:
        wrong = jtype != F.lit("STRING")
    else:
        wrong = ~(jtype.isin(*_NUMBER_TYPES) | jtype.startswith(_DECIMAL))
    missing = F.lit(f"missing field: {name}") if field.required else F.lit(None)
    error = (F.when(_absent(name), missing)
             .when(wrong, F.concat(F.lit(f"wrong type: {name} must be a {kind}, got "),
                                   F.lower(jtype))))
    return error


def _infinite_error(field: EventField) -> Column | None:
    """1e400 is a JSON number that reads as a double infinity, which no alert could carry
    as JSON: a reason on the typed column (from :func:`_typed_fields`), or None."""
    if field.json_type != NUMBER:
        return None
    return F.when(F.abs(F.col(field.name)) == F.lit(float("inf")),
                  F.lit(f"wrong type: {field.name} must be a finite number"))


def _string_map_error(name: str) -> Column:
    """A field that, when present, must be a JSON object of string to string (``tags``)."""
    values_ok = F.expr(f"forall(map_values(try_variant_get(_json, '$.{name}', "
                       "'map<string, variant>')), x -> schema_of_variant(x) = 'STRING')")
    not_object = ~F.col(_type_column(name)).startswith("OBJECT")
    return F.when(~_absent(name) & (not_object | ~values_ok),
                  F.lit(f"wrong type: {name} must be an object of string to string"))


def _error_column(name: str) -> str:
    return f"_error_{name}"


def parse_events(records: DataFrame) -> DataFrame:
    """Kafka records -> the same records plus typed event columns and an ``error`` reason.

    Kafka's own columns are renamed with a leading underscore so that rule expressions
    see only the event's fields (``value`` is the metric value, not the Kafka payload).
    Each step is its own projection so that no expensive expression (JSON parse, type
    probe) is evaluated twice for a record.

    This runs once per record on the query's hot path, so the JSON is walked as few times
    as the checks allow: a whole-value check, the VARIANT parse and one type probe per
    field, then one typed read (``from_json``) of records whose structure is sound. A
    ``try_variant_get`` to a concrete type builds a Cast expression per value, and
    ``schema_of_variant`` of the whole record renders its full type as a string; both cost
    more than everything else here together (profiled at 10,000 events/s).
    """
    kafka = ["_key", "_raw", "_topic", "_partition", "_offset", "_timestamp"]
    raw = records.select(
        F.col("key").alias("_key"), F.col("value").alias("_raw"),
        F.col("topic").alias("_topic"), F.col("partition").alias("_partition"),
        F.col("offset").alias("_offset"), F.col("timestamp").alias("_timestamp"),
    ).withColumn("_text", F.col("_raw").cast("string"))
    raw = raw.withColumn("_utf8", F.expr("is_valid_utf8(_text)"))
    # Both JSON parsers read the first value of a text and ignore whatever follows it
    # ('{...} x', '{...}{...}', '{...}]'): not valid JSON, so such a record must be a dead
    # letter. So the text is parsed wrapped twice, and each wrap fails on what the other
    # could let through:
    # - as '[<text>,0]' it must be an array of exactly two elements;
    # - as '{"v":<text>}' it must parse at all (the variant it yields is the record's).
    # Either wrap alone can be closed early by the text itself: '<value>,0] x' makes the
    # array wrap '[<value>,0]' plus ignored junk, and '<value>, "k": 1' is a valid object
    # wrap. Both at once cannot: after the value, a text that closes the array needs
    # ']' or ',' <value> ',' before a ']', one that closes the object needs '}' or
    # ',' <string> ':', and no token sequence is both. So when both hold, each wrap
    # closed on its own last character and the text is one JSON value.
    whole = "json_array_length(concat('[', _text, ',0]')) = 2"
    wrapped = "variant_get(try_parse_json(concat('{\"v\":', _text, '}')), '$.v')"
    # A JSON text is an object exactly when its first character after whitespace is '{'.
    is_object = f"startswith(trim(LEADING '{_JSON_WHITESPACE}' FROM _text), '{{')"
    parsed = raw.select(*kafka, "_utf8", "_text",
                        F.expr(f"CASE WHEN _utf8 AND {whole} THEN {wrapped} END")
                        .alias("_json"),
                        F.expr(is_object).alias("_object"))
    probed = parsed.select(*kafka, "_utf8", "_text", "_json", "_object", *_field_types())
    structural = (
        F.when(F.col("_raw").isNull() | (F.length("_raw") == 0), F.lit("empty value"))
        .when(~F.col("_utf8"), F.lit("not valid UTF-8"))
        .when(F.col("_json").isNull(), F.lit("malformed JSON"))
        .when(~F.col("_object"), F.lit("not a JSON object"))
    )
    errors = [_error_column(f.name) for f in FIELDS]
    checked = probed.select(*kafka, "_utf8", "_text", structural.alias("_structural"),
                            *[_field_error(f).alias(_error_column(f.name)) for f in FIELDS])
    # The typed read, only for records whose structure is sound: one streaming pass with
    # the event's schema, no per-value casts.
    decoded = checked.select(*kafka, "_utf8", "_structural", *errors,
                             F.when(F.col("_structural").isNull(),
                                    F.from_json(F.col("_text"), EVENT_DDL)).alias("_event"))
    typed = decoded.select(*kafka, "_utf8", "_structural", *errors,
                           F.col("_event").isNull().alias("_unread"),
                           *[F.col("_event")[name].alias(name) for name in FIELD_NAMES])
    reasons = []
    for f in FIELDS:
        infinite = _infinite_error(f)
        own = F.col(_error_column(f.name))
        reasons.append(own if infinite is None else F.coalesce(own, infinite))
    fields = F.concat_ws("; ", *reasons)
    # from_json failing on a record try_parse_json read would leave every field null and
    # the record matching nothing: it must be a dead letter, never silently dropped.
    error = F.coalesce(F.col("_structural"),
                       F.when(F.col("_unread"), F.lit("malformed JSON")),
                       F.when(fields != F.lit(""), fields))
    return typed.select(*kafka, "_utf8", error.alias("error"), *FIELD_NAMES)


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
    return F.array_compact(F.array(*candidates))  # the rules that did not match are null


def _highest_severity(matched: Column) -> Column:
    names = F.array(*[F.lit(s) for s in SEVERITIES])
    return F.element_at(names, F.array_max(matched["ordinal"]))


def _alert_headers(version: str, latency: bool) -> Column:
    """The alert record's headers: the rules version, and with ``latency`` what the
    appliance's in-band latency observer reads (the source event record's Kafka timestamp,
    epoch ms as ASCII decimal, and the alert's severity)."""
    headers = [F.struct(F.lit(RULES_VERSION_HEADER).alias("key"),
                        F.lit(version).cast("binary").alias("value"))]
    if latency:
        source_ms = F.expr("unix_millis(_timestamp)").cast("string").cast("binary")
        headers += [
            F.struct(F.lit(SOURCE_TIMESTAMP_HEADER).alias("key"), source_ms.alias("value")),
            F.struct(F.lit(SEVERITY_HEADER).alias("key"),
                     F.col("_severity").cast("binary").alias("value")),
        ]
    return F.array(*headers)


def _alert_json(matched: str, version: str) -> Column:
    """The alert record's JSON; ``matched``: the name of the ``_matched_rules`` column;
    ``version``: the rules version that raised it."""
    listed = F.expr(f"transform({matched}, r -> named_struct("
                    "'id', r.id, 'severity', r.severity, 'message', r.message))")
    return F.to_json(F.struct(
        F.col("event_id").alias("alert_id"), "event_id", "source", "metric", "value", "ts",
        F.col("_severity").alias("severity"), listed.alias("rules"),
        F.lit(version).alias("rules_version"),
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


def route(events: DataFrame, rules: RuleSet, topics: TopicsConfig,
          latency_headers: bool = True) -> DataFrame:
    """Parsed events -> rows ``key, value, topic, headers`` for the Kafka sink (one per
    record at most).

    Valid events matching no rule are dropped by the final ``where``. Each alert carries
    its rules version as a header and, with ``latency_headers``, the headers the in-band
    latency metric reads (``appliance.observability.alert_latency``); dead letters carry
    none.
    """
    matched = events.withColumn("_matched", _matched_rules(rules))
    # Its own projection: the severity is used by both the JSON and a header.
    with_matches = matched.withColumn("_severity", _highest_severity(F.col("_matched")))
    has_match = F.col("error").isNull() & (F.size("_matched") > 0)
    with_alert = with_matches.withColumn(
        "_alert", F.when(has_match, _alert_json("_matched", rules.version)))
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
               F.when(is_alert, _alert_headers(rules.version, latency_headers)).alias("headers")]
    # Catalyst pushes a filter down through deterministic projections by inlining them: the
    # condition ``topic IS NOT NULL`` would then carry its own copy of the whole parse,
    # rule evaluation and alert JSON, computed a second time for every record (measured:
    # throughput / 10). A nondeterministic column in the routed projection, referenced by
    # the filter, keeps the filter above it; spark_partition_id() is never negative.
    routed = checked.select(*columns, F.spark_partition_id().alias("_partition_id"))
    kept = routed.where(F.col("topic").isNotNull() & (F.col("_partition_id") >= F.lit(0)))
    return kept.drop("_partition_id")


def transform(records: DataFrame, rules: RuleSet, topics: TopicsConfig,
              latency_headers: bool = True) -> DataFrame:
    """Kafka read schema in, Kafka write schema (``key, value, topic, headers``) out."""
    return route(parse_events(records), rules, topics, latency_headers)
