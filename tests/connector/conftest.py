"""Fixtures of the connector suite: a per-test checkpoint directory and a query cleanup."""

from __future__ import annotations

import pytest


@pytest.fixture
def checkpoint(tmp_path):
    return str(tmp_path / "checkpoint")


@pytest.fixture
def queries(spark):
    """Collects started queries and stops any still running when the test ends."""
    started: list = []
    yield started
    for q in started:
        try:
            if q.isActive:
                q.stop()
        except Exception:  # noqa: BLE001 - a failed query is already stopped
            pass
