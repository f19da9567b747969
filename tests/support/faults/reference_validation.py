"""The appliance's record validation as it was built from Spark's own JSON functions (two
wrapped parses, ``schema_of_variant`` per field, a typed ``from_json``): kept as a
differential oracle for the one-pass reader that replaced it (``io.appliance.events.EventReader``
through ``appliance.query.pipeline.parse_events``). Its verdicts and reason strings are the
contract the reader must reproduce exactly; this copy only runs in tests.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from appliance.events import (
    EVENT_DDL,
    FIELD_NAMES,
    FIELDS,
    NUMBER,
    STRING,
    STRING_MAP,
    EventField,
)

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


