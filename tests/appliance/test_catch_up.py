"""A newly active instance's catch-up (``QueryProbes.wait_until_past``) over a real
checkpoint directory: it ends when a committed epoch's offsets reach the target in every
partition, when the runner's stop event is set (SIGTERM), when the query ends, or at its
bound. The query is a stand-in for the one thing asked of it here, whether it ended
(``awaitTermination``); the pair tests run it against Spark
(tests/appliance/test_ha_planned_start.py, tests/faults/test_ha_pair.py)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from appliance.process.query_probes import QueryProbes
from appliance.trigger import CONTINUOUS

TOPIC = "events"


class _Query:
    """What ``QueryProbes.terminated`` asks of a StreamingQuery: ``awaitTermination``."""

    def __init__(self) -> None:
        self.ended = threading.Event()

    def awaitTermination(self, timeout: float) -> bool:  # noqa: N802 - pyspark's name
        return self.ended.wait(timeout)


def commit_epoch(checkpoint: Path, epoch: int, offsets: dict[int, int]) -> None:
    """Epoch ``epoch`` read ``TOPIC`` up to ``offsets`` and committed (Spark's layout)."""
    for log in ("offsets", "commits"):
        (checkpoint / log).mkdir(parents=True, exist_ok=True)
    source = json.dumps({TOPIC: {str(p): o for p, o in offsets.items()}})
    (checkpoint / "offsets" / str(epoch)).write_text(f'v1\n{{"batchWatermarkMs":0}}\n{source}\n')
    (checkpoint / "commits" / str(epoch)).write_text('v1\n{"nextBatchWatermarkMs":0}\n')


@pytest.fixture
def probes(tmp_path):
    probes = QueryProbes(CONTINUOUS, str(tmp_path))
    probes.query = _Query()  # type: ignore[assignment]
    return probes


def test_it_ends_once_a_committed_epoch_reaches_every_partition(probes, tmp_path):
    commit_epoch(tmp_path, 0, {0: 4, 1: 2})
    assert not probes.wait_until_past(TOPIC, {0: 4, 1: 3}, timeout=0.3)  # its bound
    later = threading.Timer(0.3, commit_epoch, (tmp_path, 1, {0: 5, 1: 3}))
    later.start()
    started = time.monotonic()
    assert probes.wait_until_past(TOPIC, {0: 4, 1: 3}, timeout=30)
    assert time.monotonic() - started < 5
    assert probes.processed(TOPIC) == {0: 5, 1: 3}
    later.join()


def test_a_stop_or_the_query_ending_ends_it_at_once(probes):
    stop = threading.Event()
    threading.Timer(0.3, stop.set).start()
    started = time.monotonic()
    assert not probes.wait_until_past(TOPIC, {0: 1}, timeout=30, stop=stop)
    assert time.monotonic() - started < 5
    probes.query.ended.set()
    started = time.monotonic()
    assert not probes.wait_until_past(TOPIC, {0: 1}, timeout=30)
    assert time.monotonic() - started < 5
