"""The embedded broker with Debian's kcat, an independent librdkafka command-line client."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

KCAT = shutil.which("kcat")


@pytest.fixture(autouse=True)
def _kcat_installed():
    # A missing kcat is a set-up failure to fix (`make system-deps`), not a reason to skip.
    assert KCAT is not None, "kcat is not installed: run `make system-deps`"


def kcat(*args: str, stdin: str | None = None, timeout: float = 30) -> str:
    proc = subprocess.run([KCAT, *args], input=stdin, capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _consume(bootstrap: str, topic: str, offset: str) -> list[dict]:
    out = kcat("-b", bootstrap, "-C", "-t", topic, "-p", "0", "-o", offset, "-e", "-J",
               "-q")
    return [json.loads(line) for line in out.splitlines() if line.strip()]


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_kcat_produce_consume_with_keys_headers(broker, new_topic, codec):
    topic = new_topic(partitions=1)
    lines = "".join(f"key{i}:value{i}\n" for i in range(200))
    kcat("-b", broker.bootstrap, "-P", "-t", topic, "-p", "0", "-K", ":", "-H", "src=kcat",
         "-z", codec, stdin=lines)
    got = _consume(broker.bootstrap, topic, "beginning")
    assert [m["offset"] for m in got] == list(range(200))
    assert [(m["key"], m["payload"]) for m in got] == [
        (f"key{i}", f"value{i}") for i in range(200)]
    assert all(m["headers"] == ["src", "kcat"] for m in got)


def test_kcat_metadata_offsets_and_timestamps(broker, new_topic):
    topic = new_topic(partitions=3)
    meta = json.loads(kcat("-b", broker.bootstrap, "-L", "-J", "-t", topic))
    (t,) = [t for t in meta["topics"] if t["topic"] == topic]
    assert [p["partition"] for p in t["partitions"]] == [0, 1, 2]

    kcat("-b", broker.bootstrap, "-P", "-t", topic, "-p", "0",
         stdin="".join(f"r{i}\n" for i in range(10)))
    assert [m["payload"] for m in _consume(broker.bootstrap, topic, "7")] == ["r7", "r8", "r9"]
    assert _consume(broker.bootstrap, topic, "end") == []
    first = _consume(broker.bootstrap, topic, "beginning")
    ts = first[4]["ts"]
    by_time = _consume(broker.bootstrap, topic, f"s@{ts}")
    assert by_time[0]["offset"] <= 4 and by_time[0]["ts"] >= ts
    assert by_time[-1]["payload"] == "r9"
    q = kcat("-b", broker.bootstrap, "-Q", "-t", f"{topic}:0:{ts}")
    assert f"offset {by_time[0]['offset']}" in q


def test_kcat_unknown_topic_is_reported_not_created(broker):
    proc = subprocess.run([KCAT, "-b", broker.bootstrap, "-L", "-J", "-t", "kcat-nope"],
                          capture_output=True, text=True, timeout=30)
    meta = json.loads(proc.stdout)
    (t,) = meta["topics"]
    assert t["topic"] == "kcat-nope" and t.get("error")


def test_kcat_balanced_consumer_group_commits_and_resumes(broker, new_topic):
    """``kcat -G``: a consumer-group member; a second run resumes at the committed offsets."""
    topic = new_topic(partitions=3)
    group = f"kcat-{topic}"
    kcat("-b", broker.bootstrap, "-P", "-t", topic, "-p", "0",
         stdin="".join(f"a{i}\n" for i in range(10)))
    kcat("-b", broker.bootstrap, "-P", "-t", topic, "-p", "2",
         stdin="".join(f"c{i}\n" for i in range(5)))

    def consume_group() -> list[dict]:
        out = kcat("-b", broker.bootstrap, "-G", group, "-X", "auto.offset.reset=earliest",
                   "-e", "-J", "-q", topic, timeout=60)
        return [json.loads(line) for line in out.splitlines() if line.strip()]

    first = consume_group()
    assert sorted((m["partition"], m["offset"]) for m in first) == (
        [(0, i) for i in range(10)] + [(2, i) for i in range(5)])
    kcat("-b", broker.bootstrap, "-P", "-t", topic, "-p", "1", stdin="b0\nb1\n")
    kcat("-b", broker.bootstrap, "-P", "-t", topic, "-p", "0", stdin="a10\n")
    again = consume_group()
    assert sorted((m["partition"], m["payload"]) for m in again) == [
        (0, "a10"), (1, "b0"), (1, "b1")]
