"""Shared pytest fixtures.

Broker fixtures: one embedded broker subprocess per test
session, and a factory for unique topic names so tests never see each other's records.
"""

from __future__ import annotations

import os
import re
import uuid

import pytest

from appliance.broker import EmbeddedBroker
from appliance.broker.wire.codegen import STRICT_ENV

# Every broker the suite starts (in-process or as a subprocess, which inherits this) encodes
# responses strictly: a handler's misspelt or missing response key fails the test instead of
# going out as a silent default.
os.environ[STRICT_ENV] = "1"


@pytest.fixture(scope="session")
def broker(tmp_path_factory):
    """A running ``EmbeddedBroker`` (in memory) shared by the whole session."""
    log_dir = tmp_path_factory.mktemp("broker")
    b = EmbeddedBroker(log_path=log_dir / "broker.log")
    b.start()
    yield b
    b.stop()


@pytest.fixture
def new_topic(broker, request):
    """``new_topic(partitions=2) -> name``: creates a fresh, uniquely named topic."""
    stem = re.sub(r"[^a-zA-Z0-9._-]", "-", request.node.name)[:60]

    def make(partitions: int = 2, configs: dict | None = None) -> str:
        name = f"{stem}-{uuid.uuid4().hex[:8]}"
        broker.create_topics({name: partitions}, configs=configs)
        return name

    return make


# --- Spark fixture ------------------------------------
# One SparkSession (one JVM) per pytest process: every suite that needs Spark shares it.


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    """A local[2] SparkSession with the appliance-kafka connector on its classpath.

    Two cores: continuous queries need one task slot per input partition, and the tests'
    topics have at most two.
    """
    from pyspark.sql import SparkSession

    from appliance.connector import spark_jars_conf

    warehouse = tmp_path_factory.mktemp("spark-warehouse")
    builder = (
        SparkSession.builder.master("local[2]")
        .appName("appliance-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.warehouse.dir", str(warehouse))
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.streaming.stopTimeout", "30s")
        # Tests stop their brokers; the sink's idle producers for them close after 30 s
        # (not Spark's 10 min), so their reconnect warnings do not run on in the log.
        .config("spark.kafka.producer.cache.timeout", "30s")
        .config("spark.kafka.producer.cache.evictorThreadRunInterval", "5s")
    )
    for key, value in spark_jars_conf().items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    yield session
    session.stop()
