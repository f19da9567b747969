"""Fixtures for loadgen's end-to-end tests: a real broker, fresh topics, the relay stand-in.

The broker is the suite-wide ``broker`` fixture when the project provides one (shared, so
the whole ``make test`` starts one broker), else an embedded broker of our own.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RELAY = Path(__file__).with_name("relay.py")


def child_env() -> dict[str, str]:
    """Children import loadgen/appliance from the work tree even if not pip-installed."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    return env


@dataclass(frozen=True)
class ChildEnv:
    root: Path
    env: dict


@pytest.fixture(scope="session")
def lg_env() -> ChildEnv:
    """Working directory and environment for loadgen/locust child processes."""
    return ChildEnv(ROOT, child_env())


@pytest.fixture(scope="session")
def lg_bootstrap(request) -> str:
    try:
        shared = request.getfixturevalue("broker")
    except pytest.FixtureLookupError:
        from appliance.broker.embedded import EmbeddedBroker

        own = EmbeddedBroker().start()
        request.addfinalizer(own.stop)
        return own.bootstrap
    return shared if isinstance(shared, str) else shared.bootstrap


@pytest.fixture
def lg_topics(lg_bootstrap):
    """Three fresh topics (events, alerts, dead letters) so runs never see each other."""
    from confluent_kafka.admin import AdminClient, NewTopic

    tag = uuid.uuid4().hex[:8]
    topics = {"events": f"lg-{tag}-events", "alerts": f"lg-{tag}-alerts",
              "dlq": f"lg-{tag}-events.dlq"}
    admin = AdminClient({"bootstrap.servers": lg_bootstrap})
    futures = admin.create_topics([NewTopic(t, num_partitions=2, replication_factor=1)
                                   for t in topics.values()], operation_timeout=10)
    for future in futures.values():
        future.result(timeout=15)
    return topics


class Relay:
    def __init__(self, proc: subprocess.Popen):
        self.proc = proc

    def pause(self) -> None:
        os.kill(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.kill(self.proc.pid, signal.SIGCONT)


@pytest.fixture
def relay_factory(lg_bootstrap, lg_topics):
    """``start(*extra_args) -> Relay``: the test-only appliance stand-in on this test's topics."""
    procs = []

    def start(*extra_args: str) -> Relay:
        proc = subprocess.Popen(
            [sys.executable, str(RELAY), "--bootstrap", lg_bootstrap,
             "--events", lg_topics["events"], "--alerts", lg_topics["alerts"],
             "--dlq", lg_topics["dlq"], "--max-seconds", "300", *extra_args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env(),
        )
        procs.append(proc)
        line = _read_line(proc, timeout=30)
        assert line.strip() == "READY", f"relay did not start: {line!r}"
        return Relay(proc)

    yield start
    for proc in procs:
        os.kill(proc.pid, signal.SIGCONT)
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


@pytest.fixture
def relay(relay_factory) -> Relay:
    """The stand-in relay (tests/loadgen/relay.py), faithful: no injected faults."""
    return relay_factory()


def _read_line(proc: subprocess.Popen, timeout: float) -> str:
    import selectors

    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if sel.select(timeout=0.2):
            return proc.stdout.readline()
        if proc.poll() is not None:
            return ""
    return ""
