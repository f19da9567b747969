"""The broker suite's Java check programs (tests/broker/java): their classpath, and running
one with its ``KEY=VALUE`` answer lines read back."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from appliance.connector import KAFKA_CLIENTS_JAR

ROOT = Path(__file__).resolve().parents[3]
JAVA_SRC = Path(__file__).resolve().parents[2] / "broker" / "java"


def spark_jars_dir() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent / "jars"


def java_classpath(classes: Path) -> str:
    return os.pathsep.join([str(classes), str(KAFKA_CLIENTS_JAR), str(spark_jars_dir() / "*")])


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
