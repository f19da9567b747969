"""The benchmarks' Java drivers: one classpath and one compile step for all of them.

The drivers use the same ``kafka-clients`` jar as the Spark connector (the client the
appliance really runs) and pyspark's jars for slf4j; classes go to ``build/bench-java``.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pyspark

from appliance.connector import KAFKA_CLIENTS_JAR

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ROOT / "bench" / "java"
CLASSES = ROOT / "build" / "bench-java"


def classpath() -> str:
    jars = Path(pyspark.__file__).resolve().parent / "jars"
    return os.pathsep.join([str(CLASSES), str(KAFKA_CLIENTS_JAR), str(jars / "*")])


def compile_driver(source: str, timeout: float = 300.0, before: tuple[Path, ...] = ()) -> str:
    """Compile ``bench/java/<source>`` and the bench classes it uses (javac finds them on
    the source path: ``PacedSend``, the broker benches' one sender); returns the classpath
    to run it with. ``before``: jars ahead of the rest (the connector, for a bench of its
    classes)."""
    cp = os.pathsep.join([*map(str, before), classpath()])
    CLASSES.mkdir(parents=True, exist_ok=True)
    subprocess.run(["javac", "-nowarn", "-encoding", "UTF-8", "-d", str(CLASSES), "-cp", cp,
                    "-sourcepath", str(SOURCES),
                    str(SOURCES / source)], check=True, timeout=timeout)
    return cp
