"""Broker-suite fixtures: the Java check program, compiled once per session."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
JAVA_SRC = Path(__file__).resolve().parent / "java"
KAFKA_CLIENTS_JAR = ROOT / "build" / "jars" / "kafka-clients-3.9.1.jar"


def spark_jars_dir() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent / "jars"


def java_classpath(classes: Path) -> str:
    return os.pathsep.join([str(classes), str(KAFKA_CLIENTS_JAR), str(spark_jars_dir() / "*")])


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


def run_java(classpath: str, main: str, *args: str, timeout: float = 120) -> dict[str, str]:
    """Run a check program; returns its KEY=VALUE output lines as a dict."""
    proc = subprocess.run(["java", "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-cp", classpath,
                           main, *args], capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{main} failed:\n{proc.stdout}\n{proc.stderr[-4000:]}"
    out = {}
    for line in proc.stdout.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            out[key] = value
    return out
