"""The sink's shared producers (``ProducerCache``): one per JVM and settings, a retired one
closed with its last lease, and an idle one closed after Spark's
``spark.kafka.producer.cache.timeout`` by the evictor that runs every
``spark.kafka.producer.cache.evictorThreadRunInterval``; a bad value of either refuses
the write when it is planned, naming the key. Java checks (tests/connector/java)
run through spark-submit so the evictor reads those settings as it does on an executor."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.java]

TIMEOUT_MS = 2000
CHECKS = [
    "writers_with_the_same_settings_share_one_producer",
    "idle_producer_kept_until_its_timeout",
    "idle_producer_closed_after_its_timeout",
    "leased_producer_never_evicted",
    "retired_producer_closes_with_its_last_lease",
    "evictor_closes_idle_producers_with_the_spark_settings",
    "cache_settings_parsed_and_bad_ones_refused_with_the_key",
    "bad_cache_setting_fails_the_write_when_planned",
]


@pytest.fixture(scope="module")
def results(connector_java_checks):
    return connector_java_checks.submit(
        "ProducerCacheCheck", str(TIMEOUT_MS),
        conf={"spark.kafka.producer.cache.timeout": f"{TIMEOUT_MS}ms",
              "spark.kafka.producer.cache.evictorThreadRunInterval": "200ms"})


@pytest.mark.parametrize("check", CHECKS)
def test_producer_cache(results, check):
    assert results.get(check) == "PASS", results.get(check, "not run")


def test_every_check_is_asserted(results):
    assert sorted(results) == sorted(CHECKS)
