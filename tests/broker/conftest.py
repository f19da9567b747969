"""Broker-suite fixtures: the Java check program, compiled once per session."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from broker_helpers import JAVA_SRC, KAFKA_CLIENTS_JAR, ROOT, java_classpath


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
