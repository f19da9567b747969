"""One builder for the pipeline's streaming queries: Kafka in, ``transform``, Kafka out.

Why one: the appliance's query and the micro-batch warm-up's streaming batches
(``appliance.query.warmup``) must read, transform and write the same way, or the warm-up
compiles a plan the query never runs. The callers differ only in what ``StreamSpec`` says:
topic and offsets, the options' precedence (each caller merges its own), checkpoint, name
and trigger.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pyspark.sql import SparkSession
from pyspark.sql.streaming import DataStreamWriter

from appliance.config import TopicsConfig
from appliance.connector import CONNECTOR_FORMAT
from appliance.query.pipeline import RuleEvaluation, transform


@dataclass(frozen=True)
class StreamSpec:
    """What one streaming query of the pipeline reads, where it writes and how it runs."""

    name: str                          # the query's name (``StreamingQuery.name``)
    # The connector's source options, ``subscribe`` and ``startingOffsets`` included, in
    # the precedence the caller wants (merged by it).
    reader_options: Mapping[str, str]
    # The connector's sink options and the query's own (async progress...), merged likewise.
    writer_options: Mapping[str, str]
    checkpoint: str
    output_mode: str                   # TriggerMode.output_mode
    trigger: Mapping[str, str]         # DataStreamWriter.trigger's keyword
    topics: TopicsConfig               # where the alerts and dead letters go
    latency_headers: bool              # as ``transform`` takes it


def stream_writer(spark: SparkSession, rules: RuleEvaluation,
                  spec: StreamSpec) -> DataStreamWriter:
    """The query evaluating ``rules`` (the appliance's rule book) as ``spec`` says, planned
    on the Python side and ready to ``start()``."""
    records = spark.readStream.format(CONNECTOR_FORMAT).options(**spec.reader_options).load()
    output = transform(records, rules, spec.topics, latency_headers=spec.latency_headers)
    return (output.writeStream.format(CONNECTOR_FORMAT).queryName(spec.name)
            .option("checkpointLocation", spec.checkpoint)
            .options(**spec.writer_options)
            .outputMode(spec.output_mode)
            .trigger(**spec.trigger))
