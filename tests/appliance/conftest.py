"""Fixtures of the appliance suite.

``appliance_spark`` is the session-wide ``spark`` fixture (tests/conftest.py, with the
``appliance-kafka`` jars), so the whole test run pays for one JVM. The appliance runs its
query in ``spark.newSession()``, so its SQL settings do not leak into other suites.
"""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def appliance_spark(spark):
    return spark
