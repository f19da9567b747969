"""Shared pytest fixtures.

Broker fixtures: one embedded broker subprocess per test
session, and a factory for unique topic names so tests never see each other's records.
"""

from __future__ import annotations

import os
import re
import uuid
from pathlib import Path

import pytest

from appliance.broker import EmbeddedBroker
from appliance.broker.wire.codegen import STRICT_ENV

TESTS = Path(__file__).resolve().parent
#: What ``make test-fast`` (the inner loop) leaves out besides the spark, java, cluster,
#: deploy and exclusive marks: suites and files that run real clients end to end, kill and
#: restart processes, or run load for seconds. Their tests get the ``e2e`` mark here.
E2E = {
    "faults": "kill -9, power cuts, full disks, outages, the nemesis",
    "quickstart": "the README's commands and make demo, as written",
    "deploy": "ansible-playbook and ansible-lint over the site",
    "broker/test_groups_clients.py": "real clients' consumer groups through rebalances",
    "broker/test_admin_clients.py": "real admin clients against a live group",
    "broker/test_acls_clients.py": "real clients allowed and denied",
    "broker/test_auth_clients.py": "real clients over TLS and SASL",
    "broker/test_kcat.py": "kcat as an independent client",
    "broker/test_confluent_kafka.py": "librdkafka producing and consuming",
    "broker/test_kafka_python.py": "kafka-python producing and consuming",
    "broker/test_durability.py": "kill -9 and restarts on a data directory",
    "broker/test_client_limits.py": "login floods and connection caps",
    "broker/test_admin_cluster.py": "real admin clients' cluster calls and SCRAM logins",
    "broker/test_topic_configs_clients.py": "real clients through every topic codec",
    "broker/test_memory_bound.py": "a gigabyte through a broker",
    "loadgen/test_loadgen_end_to_end.py": "load runs against the relay stand-in",
    "loadgen/test_loadgen_locust.py": "Locust runs",
    "bench/test_latency_driver.py": "the Java load driver",
    "bench/test_broker_group_churn.py": "the group churn bench's quick form (librdkafka members)",
    "appliance/test_ha_election.py": "a pair's election through kill -9 and SIGSTOP",
}


#: The long variants (``faults_long``: more rounds, other triggers of a fault test) run only
#: under ``make faults``, which sets this; the ``soak`` test only under ``make soak``.
FAULTS_LONG = os.environ.get("FAULTS_LONG") == "1"


def pytest_collection_modifyitems(config, items):
    soak = "SOAK_SECONDS" in os.environ
    keep, drop = [], []
    for item in items:
        where = Path(item.fspath).resolve().relative_to(TESTS)
        if where.parts[0] in E2E or where.as_posix() in E2E:
            item.add_marker(pytest.mark.e2e)
        unwanted = (not FAULTS_LONG and item.get_closest_marker("faults_long")) or (
            not soak and item.get_closest_marker("soak"))
        (drop if unwanted else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


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
