"""Fetch the pinned Java kafka-clients jar without installing the wheel that carries it.

No Maven repository is reachable, but the official kafka-clients-3.9.1.jar ships
byte-identical inside a PyPI wheel. We download that wheel with pip's hash checking,
extract only the one jar, and verify the jar's own sha256. The wheel is never
installed: it would claim the ``pyflink`` package name.
"""

from __future__ import annotations

import hashlib
import sys
import tempfile
import zipfile
from pathlib import Path

from pinned_wheel import download

WHEEL_REQUIREMENT = "shigawire-apache-flink-libraries==2.0.0.post1"
WHEEL_SHA256 = "aaa65537d3f0c0ff279185d8243024f0efd95788ba044bf249ba0f40b69289cd"
MEMBER = "pyflink/lib/kafka-clients.jar"
JAR_NAME = "kafka-clients-3.9.1.jar"
JAR_SHA256 = "7568b998572d256f0b7bc0afdc1b7a2588b8b08415c62ce314c864a6851ae9d9"


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def fetch(dest_dir: Path) -> Path:
    dest_dir.mkdir(parents=True, exist_ok=True)
    target = dest_dir / JAR_NAME
    if target.exists() and sha256_of(target) == JAR_SHA256:
        return target
    with tempfile.TemporaryDirectory() as tmp:
        wheel = download(WHEEL_REQUIREMENT, WHEEL_SHA256, Path(tmp), "fetch_kafka_clients")
        partial = target.with_suffix(".part")
        with zipfile.ZipFile(wheel) as zf, zf.open(MEMBER) as src, partial.open("wb") as out:
            while chunk := src.read(1 << 20):
                out.write(chunk)
    actual = sha256_of(partial)
    if actual != JAR_SHA256:
        partial.unlink()
        raise SystemExit(f"fetch_kafka_clients: {JAR_NAME} sha256 {actual} != {JAR_SHA256}")
    partial.replace(target)
    return target


if __name__ == "__main__":
    out = fetch(Path(sys.argv[1] if len(sys.argv) > 1 else "appliance/jars"))
    print(f"kafka-clients jar: {out}")
