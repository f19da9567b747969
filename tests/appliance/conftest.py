"""Fixtures of the appliance suite.

``appliance_spark`` reuses the session-wide ``spark`` fixture (the connector's, with the
``appliance-kafka`` jars) so the whole test run pays for one JVM; only if that fixture
is absent does it build an equivalent local session itself.
"""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def appliance_spark(request):
    try:
        yield request.getfixturevalue("spark")
        return
    except pytest.FixtureLookupError:
        pass
    from pyspark.sql import SparkSession

    from appliance.config import Config
    from appliance.session import spark_conf

    builder = SparkSession.builder.master("local[2]").appName("appliance-tests")
    for key, value in spark_conf(Config()).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    yield spark
    spark.stop()

