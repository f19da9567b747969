"""Shared pytest fixtures.

Broker fixtures (owned by the broker engineer): one embedded broker subprocess per test
session, and a factory for unique topic names so tests never see each other's records.
"""

from __future__ import annotations

import re
import uuid

import pytest

from appliance.broker import EmbeddedBroker


@pytest.fixture(scope="session")
def broker(tmp_path_factory):
    """A running ``EmbeddedBroker`` (in memory) shared by the whole session."""
    log_dir = tmp_path_factory.mktemp("broker")
    b = EmbeddedBroker(log_path=log_dir / "broker.log")
    b.start()
    yield b
    b.stop()


@pytest.fixture
def topic_factory(broker, request):
    """``make(partitions=2) -> name``: creates a fresh, uniquely named topic."""
    stem = re.sub(r"[^a-zA-Z0-9._-]", "-", request.node.name)[:60]

    def make(partitions: int = 2, configs: dict | None = None) -> str:
        name = f"{stem}-{uuid.uuid4().hex[:8]}"
        broker.create_topics({name: partitions}, configs=configs)
        return name

    return make


@pytest.fixture
def new_topic(topic_factory):
    """Alias of ``topic_factory``: ``new_topic(partitions=2) -> str``."""
    return topic_factory
