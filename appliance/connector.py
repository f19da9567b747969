"""Where the Spark Kafka connector's jars live, the Spark conf that loads them, and how the
driver's Python reaches the classes in them.

Spark's own ``spark-sql-kafka`` cannot be installed here, so every SparkSession the product
creates loads the ``appliance-kafka`` connector (built by ``make connector``) plus the
``kafka-clients`` jar it links against. This module is the one place that knows those paths.

The jars are package data (``appliance/jars/``): ``make setup`` puts them there in a
checkout, and ``make dist`` packs them into the wheel, so the same lookup next to this file
works in an editable checkout and in an installed wheel alike.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pyspark is imported by the modules that start Spark, not by the CLI
    from py4j.java_gateway import JVMView
    from pyspark.sql import SparkSession

#: The connector's short name (``DataStreamReader.format``, ``DataFrameWriter.format``...).
CONNECTOR_FORMAT = "appliance-kafka"

JARS_DIR = Path(__file__).resolve().parent / "jars"
CONNECTOR_JAR = JARS_DIR / "appliance-kafka-connector.jar"
#: The Java Kafka client the connector links against (``appliance --version`` says it).
KAFKA_CLIENTS_VERSION = "3.9.1"
KAFKA_CLIENTS_JAR = JARS_DIR / f"kafka-clients-{KAFKA_CLIENTS_VERSION}.jar"

#: Spark conf that lets the connector's sink run under the real-time trigger. Spark 4.3
#: checks real-time sinks against a built-in allowlist (``RealTimeModeAllowlist``) naming
#: only Spark's own sinks; with the check off it logs a warning instead of refusing to start.
#: Real-time mode also turns on async progress tracking for stateless queries, which Spark
#: allows only for its own sinks (by table name); the conf keeps offset/commit logging
#: synchronous, which costs a few ms per (multi-second) real-time batch, not per record.
REAL_TIME_SINK_CONF = {
    "spark.sql.streaming.realTimeMode.allowlistCheck": "false",
    "spark.sql.streaming.realTimeMode.asyncProgressTrackingByDefault.enabled": "false",
}

#: Spark sends batch reads/writes of the short name ``kafka`` down its V1 code path
#: (``spark.sql.sources.useV1SourceList`` lists it by default), which only Spark's own
#: connector implements. Dropping ``kafka`` from that list (the rest is Spark's default)
#: lets ``format("kafka")`` batch queries use this connector's V2 table; streaming is V2 anyway.
KAFKA_ALIAS_CONF = {"spark.sql.sources.useV1SourceList": "avro,csv,json,orc,parquet,text"}


class ConnectorJarsMissing(RuntimeError):
    """The connector has not been built: tell the user the one command that fixes it."""


def jars() -> list[str]:
    """Absolute paths of the connector jar and the kafka-clients jar, in classpath order."""
    missing = [p for p in (CONNECTOR_JAR, KAFKA_CLIENTS_JAR) if not p.is_file()]
    if missing:
        names = ", ".join(str(p) for p in missing)
        raise ConnectorJarsMissing(
            f"connector jars not found ({names}): run `make setup` in a checkout, or "
            f"install the wheel built by `make dist`")
    return [str(CONNECTOR_JAR), str(KAFKA_CLIENTS_JAR)]


def driver_jvm(spark: SparkSession) -> JVMView:
    """The driver JVM's classes through py4j (the connector's Java side, Spark internals).
    pyspark leaves it unset only without a local JVM (Spark Connect), which the appliance
    never runs on."""
    jvm = spark.sparkContext._jvm
    if jvm is None:
        raise RuntimeError("the SparkSession has no driver JVM: the appliance needs a "
                           "classic SparkSession, not Spark Connect")
    return jvm


def spark_jars_conf() -> dict[str, str]:
    """The Spark conf entries every SparkSession of the product needs for the connector."""
    return {"spark.jars": ",".join(jars()), **REAL_TIME_SINK_CONF, **KAFKA_ALIAS_CONF}
