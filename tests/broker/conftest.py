"""Broker-suite fixtures: the Java check programs, compiled once per session, and the
broker the consumer-group tests share per module."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from appliance.broker import EmbeddedBroker

from support.broker.group_harness import GROUP_BROKER_ARGS
from support.broker.java_programs import JAVA_SRC, KAFKA_CLIENTS_JAR, ROOT, java_classpath


@pytest.fixture(scope="session")
def java_checks() -> str:
    """Classpath with tests/broker/java compiled into build/broker-java-tests."""
    assert shutil.which("javac"), "javac (JDK 17+) is required for the Java client tests"
    assert KAFKA_CLIENTS_JAR.exists(), f"{KAFKA_CLIENTS_JAR} missing: run `make setup`"
    out = ROOT / "build" / "broker-java-tests"
    out.mkdir(parents=True, exist_ok=True)
    sources = sorted(str(p) for p in JAVA_SRC.glob("*.java"))
    subprocess.run(["javac", "-nowarn", "-encoding", "UTF-8", "-d", str(out),
                    "-cp", java_classpath(out), *sources], check=True, timeout=180)
    return java_classpath(out)


@pytest.fixture(scope="module")
def group_broker(tmp_path_factory):
    """A broker for consumer groups of real clients (``group_harness.GROUP_BROKER_ARGS``),
    shared by a module's tests: each names its own topics and groups."""
    with EmbeddedBroker(extra_args=GROUP_BROKER_ARGS,
                        log_path=tmp_path_factory.mktemp("groups") / "broker.log") as b:
        yield b
