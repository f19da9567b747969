"""Power cuts under the broker's flush policies, simulated by dropping every write that was
not fsynced (``power_cut.py``: an LD_PRELOAD library records what each fsync made
durable; after kill -9 the data directory is rebuilt from that record alone).

- ``fsync``: cut at random moments of a stream of acks=all produces (records of random
  size, small segments so files roll often) and topic creations: no acknowledged topic
  or record is lost, and each record reads back byte-identical at its offset.
- ``write``: the same cut loses acknowledged records. The control that the simulation
  really drops what was not synced, so the ``fsync`` test could fail.
- ``interval``: what was acknowledged before an interval flush completed survives.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from appliance.broker import EmbeddedBroker
from appliance.broker.wire import errors
from appliance.broker.wire.client import WireClient

from support.faults import power_cut
from support.faults.fault_knobs import knob
from support.wire_helpers import create_topic, produce_one, read_partition, topic_partitions

CUTS = knob(6, 25)
SEGMENT_BYTES = 16 * 1024


@pytest.fixture(scope="module")
def shim(tmp_path_factory) -> Path:
    return power_cut.build(tmp_path_factory.mktemp("power-cut-shim"))


@dataclass
class Acked:
    """Everything the broker acknowledged, across all cuts."""

    topics: dict[str, int] = field(default_factory=dict)  # name -> partitions
    records: dict[tuple[str, int, int], bytes] = field(default_factory=dict)


class Stream(threading.Thread):
    """acks=all produces, now and then a CreateTopics, until the broker is cut (or
    ``limit`` records); only what the broker answered with success counts as acked."""

    def __init__(self, bootstrap: str, acked: Acked, rng: random.Random, tag: str,
                 limit: int = 100_000) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.acked, self.rng, self.tag, self.limit = (bootstrap, acked, rng,
                                                                      tag, limit)
        self.count = 0
        self.failure: str | None = None

    def run(self) -> None:
        rng, acked = self.rng, self.acked
        try:
            with WireClient(self.bootstrap) as c:
                for i in range(self.limit):
                    if i == 0 or rng.random() < 0.005:
                        name, n = f"t-{self.tag}-{i}", rng.randint(1, 3)
                        code = create_topic(c, name, n)
                        if code != errors.NONE:
                            self.failure = f"CreateTopics {name}: error {code}"
                            return
                        acked.topics[name] = n
                    topic = rng.choice(sorted(acked.topics))
                    partition = rng.randrange(acked.topics[topic])
                    value = b"%s:%d:" % (self.tag.encode(), i) + rng.randbytes(
                        rng.randint(50, 3000))
                    code, offset = produce_one(c, topic, partition, value)
                    if code != errors.NONE:
                        self.failure = f"produce to {topic}-{partition}: error {code}"
                        return
                    acked.records[(topic, partition, offset)] = value
                    self.count += 1
        except OSError:  # ConnectionError included: the cut
            return


def lost(bootstrap: str, acked: Acked) -> list[str]:
    """What the broker no longer has of what it acknowledged (empty: nothing)."""
    with WireClient(bootstrap) as c:
        present = topic_partitions(c)
    out = []
    stored: dict[tuple[str, int], dict[int, bytes]] = {}
    for topic, partitions in acked.topics.items():
        if present.get(topic, 0) < partitions:
            out.append(f"topic {topic} ({partitions} partitions)")
            continue
        for p in range(partitions):
            stored[(topic, p)] = read_partition(bootstrap, topic, p)
    for (topic, p, offset), value in acked.records.items():
        got = stored.get((topic, p), {}).get(offset)
        if got != value:
            out.append(f"{topic}-{p}@{offset}" + ("" if got is None else " (other bytes)"))
    return out


def _broker(shim: Path, data: Path, store: Path, log: Path, flush: str,
            *extra: str) -> EmbeddedBroker:
    power_cut.mark_durable(shim, store, data)
    return EmbeddedBroker(data_dir=data, log_path=log, extra_env=power_cut.env(shim, store),
                          extra_args=["--flush", flush, "--segment-bytes", str(SEGMENT_BYTES),
                                      "--flush-interval-ms", "100", *extra])


def _cut(b: EmbeddedBroker, data: Path, store: Path, target: Path) -> None:
    """Power cut: kill -9, then what the disk would hold is ``target``."""
    assert b.kill() == -9
    power_cut.rebuild(store, data, target)


def test_fsync_policy_loses_no_acknowledged_record_over_power_cuts(tmp_path, shim, rng):
    acked = Acked()
    data = tmp_path / "data-0"
    data.mkdir()
    for cut in range(CUTS):
        store = tmp_path / f"store-{cut}"
        b = _broker(shim, data, store, tmp_path / "broker.log", "fsync")
        b.start()
        assert lost(b.bootstrap, acked) == [], f"after cut {cut}"
        stream = Stream(b.bootstrap, acked, rng, tag=str(cut))
        stream.start()
        deadline = time.monotonic() + 30
        while stream.count == 0 and stream.is_alive() and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(rng.uniform(0.05, 1.5))  # the cut lands anywhere in the stream
        _cut(b, data, store, tmp_path / f"data-{cut + 1}")
        stream.join(timeout=30)
        assert stream.failure is None, stream.failure
        assert stream.count > 0
        data = tmp_path / f"data-{cut + 1}"
    b = EmbeddedBroker(data_dir=data, log_path=tmp_path / "broker.log")
    b.start()
    try:
        gone = lost(b.bootstrap, acked)
    finally:
        b.stop()
    print(f"power loss, fsync: {CUTS} cuts, {len(acked.topics)} topics and "
          f"{len(acked.records)} records acknowledged, lost {len(gone)}")
    assert gone == []


def test_write_policy_loses_acknowledged_records_on_a_power_cut(tmp_path, shim, rng):
    """The control: without fsync the simulated cut does lose acknowledged records."""
    acked = Acked()
    data, store = tmp_path / "data-0", tmp_path / "store-0"
    data.mkdir()
    b = _broker(shim, data, store, tmp_path / "broker.log", "write")
    b.start()
    stream = Stream(b.bootstrap, acked, rng, tag="w", limit=200)
    stream.start()
    stream.join(timeout=60)
    assert stream.failure is None and stream.count == 200
    _cut(b, data, store, tmp_path / "data-1")
    b = EmbeddedBroker(data_dir=tmp_path / "data-1", log_path=tmp_path / "broker.log")
    b.start()
    try:
        gone = lost(b.bootstrap, acked)
    finally:
        b.stop()
    print(f"power loss, write: {len(acked.records)} acknowledged, lost {len(gone)}")
    assert gone, "a power cut kept records that were never fsynced: the simulation is broken"


def test_interval_policy_keeps_what_an_interval_flush_synced(tmp_path, shim, rng):
    acked = Acked()
    data, store = tmp_path / "data-0", tmp_path / "store-0"
    data.mkdir()
    b = _broker(shim, data, store, tmp_path / "broker.log", "interval")
    b.start()
    stream = Stream(b.bootstrap, acked, rng, tag="i", limit=300)
    stream.start()
    stream.join(timeout=60)
    assert stream.failure is None and stream.count == 300
    # Wait (bounded) until the interval flush has synced every partition's newest segment
    # at its current size, and the partition directory with the segment's name in it.
    partition_dirs = [data.resolve() / "topics" / t / str(p) for t, n in acked.topics.items()
                      for p in range(n)]
    deadline = time.monotonic() + 60
    while not _all_synced(store, partition_dirs) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _all_synced(store, partition_dirs), "no interval flush within 60 s"
    _cut(b, data, store, tmp_path / "data-1")
    b = EmbeddedBroker(data_dir=tmp_path / "data-1", log_path=tmp_path / "broker.log")
    b.start()
    try:
        assert lost(b.bootstrap, acked) == []
    finally:
        b.stop()


def _all_synced(store: Path, partition_dirs: list[Path]) -> bool:
    """Has every partition's newest segment been synced at its current size, and is its
    name in the partition directory's last synced listing?"""
    records = power_cut.journal(store)
    for pdir in partition_dirs:
        segments = sorted(pdir.glob("*.log"))
        if not segments:
            continue
        newest, size = segments[-1], segments[-1].stat().st_size
        if not any(not r.is_dir and r.path == str(newest) and r.size == size
                   for r in records):
            return False
        listings = [r.key for r in records if r.is_dir and r.path == str(pdir)]
        if not listings or newest.name not in power_cut.listed_names(store, listings[-1]):
            return False
    return True
