"""Write appliance/kafka_names.py: the config names of the Java kafka-clients the wheel ships.

``[kafka]`` of ``appliance.toml`` passes every key but the appliance's own to the Kafka
clients, so a misspelt property (``bootstrap.server``) used to pass ``appliance config
check`` and be ignored by every client. The check answers without a JVM, so it needs the
producer's, consumer's and admin client's own list of names (and each one's type): this
asks the pinned kafka-clients jar once (``scripts/KafkaConfigNames.java``, run by Java's
single-file source launcher, about two seconds) and writes them as Python data.
``tests/appliance/test_kafka_properties.py`` runs it again and compares, so a kafka-clients
upgrade that changes the names fails a test until this is run again:

    .venv/bin/python scripts/kafka_config_names.py
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from appliance.connector import KAFKA_CLIENTS_JAR  # noqa: E402

OUT = ROOT / "appliance" / "kafka_names.py"
PROGRAM = Path(__file__).resolve().with_name("KafkaConfigNames.java")
CLIENTS = ("producer", "consumer", "admin")

HEADER = '''"""The Java Kafka clients' config names, from kafka-clients {version} (generated).

Written by ``scripts/kafka_config_names.py`` from the jar the wheel ships: per property name
its type (``ConfigDef.Type``: INT, LONG, BOOLEAN, STRING, LIST, CLASS, PASSWORD...) and the
clients that take it. ``appliance.kafka_properties`` reads it to check ``[kafka]`` without a
JVM.
"""

from __future__ import annotations

from typing import NamedTuple

KAFKA_CLIENTS_VERSION = {version!r}


class KafkaProperty(NamedTuple):
    type: str
    clients: tuple[str, ...]  # of "producer", "consumer", "admin"


PROPERTIES: dict[str, KafkaProperty] = {{
'''


def slf4j_api() -> Path:
    """slf4j-api from the installed pyspark's jars (kafka-clients logs through it)."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise SystemExit("kafka_config_names: pyspark is not installed (its slf4j-api jar)")
    jars = sorted((Path(spec.origin).parent / "jars").glob("slf4j-api-*.jar"))
    if not jars:
        raise SystemExit("kafka_config_names: no slf4j-api jar among pyspark's jars")
    return jars[-1]


def render() -> str:
    """The module's text, from what the jar says."""
    done = subprocess.run(["java", "-cp", f"{KAFKA_CLIENTS_JAR}:{slf4j_api()}", str(PROGRAM)],
                          capture_output=True, text=True, timeout=120, check=False)
    if done.returncode != 0:
        raise SystemExit(f"kafka_config_names: java exited {done.returncode}: "
                         f"{done.stderr.strip()[-400:]}")
    version = ""
    types: dict[str, str] = {}
    clients: dict[str, list[str]] = {}
    for line in done.stdout.splitlines():
        fields = line.split("\t")
        if fields[0] == "version":
            version = fields[1]
        elif fields[0] in CLIENTS and len(fields) == 3:
            types[fields[1]] = fields[2]
            clients.setdefault(fields[1], []).append(fields[0])
    if not version or not types:
        raise SystemExit(f"kafka_config_names: unexpected output: {done.stdout[:200]!r}")
    lines = [HEADER.format(version=version)]
    for name in sorted(types):
        lines.append(f"    {name!r}: KafkaProperty({types[name]!r}, "
                     f"{tuple(sorted(clients[name], key=CLIENTS.index))!r}),\n")
    lines.append("}\n")
    return "".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=OUT, help=f"default: {OUT}")
    args = parser.parse_args(argv)
    text = render()
    args.output.write_text(text, encoding="utf-8")
    print(f"kafka_config_names: wrote {text.count('KafkaProperty(') - 1} names to "
          f"{args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
