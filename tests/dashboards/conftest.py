"""Fixtures of the dashboards suite: a broker that may take its time to start.

Same as the session ``broker`` of tests/conftest.py, but its start is allowed up to five
minutes: on a shared CI machine Python's start-up alone has taken over 30 s.
"""

from __future__ import annotations

import pytest

from appliance.broker import EmbeddedBroker


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = EmbeddedBroker(log_path=tmp_path_factory.mktemp("broker") / "broker.log",
                       start_timeout=300)
    b.start()
    yield b
    b.stop()
