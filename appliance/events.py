"""The input event's shape: one table that rules, the pipeline and test oracles read.

An event is a UTF-8 JSON object per Kafka record (the product contract's "Input events"
table). The table says, per field, the JSON type a producer must send, whether the field
is required, and the Spark SQL type the pipeline reads it as. Rule validation (which
names a ``when`` may use), the pipeline's type checks and typed columns, and any Python
oracle of the pipeline's verdict all derive from it, so a new field is added once.

Pure Python (no pyspark import): ``appliance rules check --no-spark`` and the load tools
read it without a JVM or Spark's Python package being imported.
"""

from __future__ import annotations

from dataclasses import dataclass

# JSON types a field may have.
STRING = "string"
NUMBER = "number"
STRING_MAP = "object of string to string"


@dataclass(frozen=True)
class EventField:
    name: str
    json_type: str  # STRING | NUMBER | STRING_MAP
    required: bool
    spark_type: str  # Spark SQL DDL type the pipeline reads the field as

    def accepts(self, value: object) -> bool:
        """Whether a decoded JSON value (None for JSON null) has this field's JSON type."""
        if self.json_type == STRING:
            return isinstance(value, str)
        if self.json_type == NUMBER:
            return isinstance(value, (int, float)) and not isinstance(value, bool)
        return isinstance(value, dict) and all(isinstance(v, str) for v in value.values())


FIELDS: tuple[EventField, ...] = (
    EventField("event_id", STRING, required=True, spark_type="string"),
    EventField("ts", NUMBER, required=True, spark_type="double"),
    EventField("source", STRING, required=True, spark_type="string"),
    EventField("metric", STRING, required=True, spark_type="string"),
    EventField("value", NUMBER, required=True, spark_type="double"),
    EventField("tags", STRING_MAP, required=False, spark_type="map<string,string>"),
)

FIELD_NAMES: tuple[str, ...] = tuple(f.name for f in FIELDS)
REQUIRED: tuple[EventField, ...] = tuple(f for f in FIELDS if f.required)

# The events as a Spark DDL schema string (``spark.createDataFrame([], EVENT_DDL)``).
EVENT_DDL = ", ".join(f"{f.name} {f.spark_type}" for f in FIELDS)
