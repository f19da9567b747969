"""``appliance --version``: what this appliance runs on, as spark-submit's ``--version``
says what Spark runs on.

One line each: the appliance, Spark (the installed pyspark's version, read from its
package metadata rather than by importing it), the Java Kafka client the connector
links against, the Python Kafka clients (kafka-python, the appliance's own admin and
offsets client; confluent-kafka, the load generator's, whose ``loadgen --version`` adds
the librdkafka it runs), Python, and Java (from the JDK's ``release`` file: no
JVM is started; ``--verbose`` adds ``java -version``'s own lines, which does start one).
"""

from __future__ import annotations

import platform
from importlib.metadata import PackageNotFoundError, version

from appliance import __version__
from appliance.connector import KAFKA_CLIENTS_VERSION
from appliance.jdk import java_binary, release_version, version_lines


def _spark() -> str:
    try:
        return version("pyspark")
    except PackageNotFoundError:
        return "not installed (pip install pyspark)"


def _installed(distribution: str) -> str | None:
    try:
        return version(distribution)
    except PackageNotFoundError:
        return None


def python_kafka_clients(librdkafka: str | None = None) -> list[str]:
    """The Python Kafka clients' lines of ``--version``. ``librdkafka``: the version the
    installed confluent-kafka runs (its wheel carries its own), which only the load
    generator can ask (confluent-kafka is its extra's, never imported by this package)."""
    kafka_python = _installed("kafka-python")
    confluent = _installed("confluent-kafka")
    runs = f", librdkafka {librdkafka}" if librdkafka else ""
    return [
        f"kafka-python: {kafka_python or 'not installed'} (the appliance's admin and offsets "
        f"client)",
        f"confluent-kafka: {confluent}{runs} (the load generator's clients)" if confluent
        else "confluent-kafka: not installed (the load generator's clients: "
             "appliance[loadgen])",
    ]


def _java(verbose: bool) -> list[str]:
    java = java_binary()
    if java is None:
        return ["Java: not found (set JAVA_HOME or put java on PATH; Spark needs 17+)"]
    found = release_version(java)
    lines = [f"Java: {found or 'unknown (no release file; --verbose runs java -version)'} "
             f"({java})"]
    if verbose:
        lines += [f"  {line}" for line in version_lines(java)]
    return lines


def report(verbose: bool = False) -> str:
    """The ``--version`` text."""
    return "\n".join([
        f"appliance {__version__}",
        f"Spark: {_spark()} (pyspark)",
        f"kafka-clients: {KAFKA_CLIENTS_VERSION} (the connector's Java Kafka client)",
        *python_kafka_clients(),
        f"Python: {platform.python_version()} ({platform.python_implementation()})",
        *_java(verbose),
    ])
