"""Fixtures and knobs of the fault suite.

``make test`` runs every fault short (few rounds, short outages); ``make faults`` sets
``FAULTS_LONG=1`` for the long variants (more rounds, ~30 s broker outage, higher rate)
and runs the tests marked ``faults_long``, which ``make test`` deselects (tests/conftest.py
does, for the whole suite). The ``soak`` test (hours) runs only under ``make soak``, which
sets ``SOAK_SECONDS``.
"""

from __future__ import annotations

import os
import random
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest


@pytest.fixture
def faults_seed(request) -> int:
    """The seed of this test's random choices: ``FAULTS_SEED`` from the environment, else a
    fresh one. Always printed (pytest shows it with a failure's output), so that
    ``FAULTS_SEED=<seed> pytest <the test>`` replays the same faults at the same moments."""
    seed = int(os.environ.get("FAULTS_SEED", random.randrange(1 << 30)))
    print(f"\n{request.node.name}: FAULTS_SEED={seed}")
    return seed


@pytest.fixture
def rng(faults_seed):
    """A seeded RNG per test (``faults_seed``)."""
    return random.Random(faults_seed)


@pytest.fixture
def tmpfs(tmp_path) -> Iterator[Callable[[str], Path]]:
    """``tmpfs(size) -> Path``: a tmpfs of ``size`` (``mount -o size=``, e.g. ``"8m"``)
    mounted under the test's directory, a disk that fills for real; unmounted after the
    test. Mounting needs root (CI runs as root)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (CI runs as root)")
    mounted: list[Path] = []

    def mount(size: str) -> Path:
        where = tmp_path / f"disk{len(mounted)}"
        where.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs",
                        str(where)], check=True)
        mounted.append(where)
        return where

    try:
        yield mount
    finally:
        for where in mounted:
            subprocess.run(["umount", "-l", str(where)], check=False)


@pytest.fixture
def fault_topics(broker):
    """``fault_topics(bootstrap_broker) -> {"events", "alerts", "dead_letters"}``, fresh."""

    def make(on=broker) -> dict[str, str]:
        tag = uuid.uuid4().hex[:8]
        topics = {"events": f"faults-events-{tag}", "alerts": f"faults-alerts-{tag}",
                  "dead_letters": f"faults-dlq-{tag}"}
        on.create_topics({topics["events"]: 2, topics["alerts"]: 1,
                          topics["dead_letters"]: 1})
        return topics

    return make
