"""Fixtures of the connector suite: a per-test checkpoint directory, a query cleanup, and
the connector's Java check programs (tests/connector/java) compiled once per session."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from appliance.connector import jars

from support.connector.connector_helpers import JAVA_SRC, JavaChecks, spark_jars


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


@pytest.fixture(scope="session")
def connector_java_checks(tmp_path_factory) -> JavaChecks:
    """tests/connector/java compiled against the connector jar (same package, so the checks
    reach package-private classes), plus how to run them."""
    assert shutil.which("javac"), "javac (JDK 17+) is required for the connector's Java checks"
    out = tmp_path_factory.mktemp("connector-java-tests")
    classpath = [*jars(), *spark_jars()]
    sources = sorted(str(p) for p in JAVA_SRC.glob("*.java"))
    subprocess.run(["javac", "-nowarn", "-encoding", "UTF-8", "--release", "17", "-d", str(out),
                    "-cp", os.pathsep.join(classpath), *sources], check=True, timeout=300)
    app_jar = out.parent / (out.name + ".jar")
    subprocess.run(["jar", "--create", "--file", str(app_jar), "-C", str(out), "."],
                   check=True, timeout=120)
    return JavaChecks(classes=out, app_jar=app_jar, classpath=[str(out), *classpath])
