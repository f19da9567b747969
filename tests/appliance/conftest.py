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


@pytest.fixture(scope="module")
def sql_spark(appliance_spark):
    """A child session with the appliance's SQL settings (ANSI off, ...), as its query
    runs them; the JVM-wide (static) ones stay the test JVM's."""
    from appliance.process.session import apply_sql_settings
    from appliance.trigger import MODES
    from appliance.tuning import tuning_for

    session = appliance_spark.newSession()
    apply_sql_settings(session, tuning_for(MODES["continuous"]).spark_conf)
    return session


@pytest.fixture
def rule_book(appliance_spark):
    """``rule_book(rule_set) -> RuleBook``: a rule book holding ``rule_set`` (what
    ``transform`` evaluates), closed after the test."""
    from appliance.rules.rule_book import RuleBook

    books = []

    def make(rule_set):
        books.append(RuleBook.holding(appliance_spark, rule_set))
        return books[-1]

    yield make
    for book in books:
        book.close()
