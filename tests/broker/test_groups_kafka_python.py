"""Consumer groups with kafka-python: members as real subprocesses (group_harness.py)."""

from __future__ import annotations

from functools import partial

import pytest
from group_harness import (
    group_broker,
    python_member,
    run_assignor_round,
    run_group_lifecycle,
    run_partitions_added,
    run_static_restart,
)

launch = partial(python_member, "kafka-python")


@pytest.fixture(scope="module")
def gbroker(tmp_path_factory):
    with group_broker(tmp_path_factory.mktemp("kp-groups")) as b:
        yield b


def test_kafka_python_group_lifecycle(tmp_path):
    report = run_group_lifecycle(tmp_path, launch, "range", "kafka-python")
    print(f"\nkafka-python: join rebalance {report.join_rebalance_s:.1f} s, crash reassigned "
          f"in {report.crash_reassign_s:.1f} s, generations {report.generations}")


@pytest.mark.parametrize("assignor", ["range", "roundrobin", "sticky", "cooperative-sticky"])
def test_kafka_python_assignors(gbroker, tmp_path, assignor):
    run_assignor_round(gbroker, tmp_path, launch, assignor, "kp")


def test_kafka_python_static_member_restart(gbroker, tmp_path):
    run_static_restart(gbroker, tmp_path, launch, "range", "kp")


def test_kafka_python_partitions_added(gbroker, tmp_path):
    run_partitions_added(gbroker, tmp_path, launch, "roundrobin", "kp")
