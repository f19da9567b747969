"""Consumer groups with confluent-kafka (librdkafka): members as real subprocesses."""

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

launch = partial(python_member, "confluent")


@pytest.fixture(scope="module")
def gbroker(tmp_path_factory):
    with group_broker(tmp_path_factory.mktemp("ck-groups")) as b:
        yield b


def test_confluent_group_lifecycle(tmp_path):
    report = run_group_lifecycle(tmp_path, launch, "cooperative-sticky", "confluent")
    print(f"\nconfluent-kafka: join rebalance {report.join_rebalance_s:.1f} s, crash reassigned "
          f"in {report.crash_reassign_s:.1f} s, generations {report.generations}")


# librdkafka's assignors: it has no eager "sticky"
@pytest.mark.parametrize("assignor", ["range", "roundrobin", "cooperative-sticky"])
def test_confluent_assignors(gbroker, tmp_path, assignor):
    run_assignor_round(gbroker, tmp_path, launch, assignor, "ck")


def test_confluent_static_member_restart(gbroker, tmp_path):
    run_static_restart(gbroker, tmp_path, launch, "range", "ck")


def test_confluent_partitions_added(gbroker, tmp_path):
    run_partitions_added(gbroker, tmp_path, launch, "cooperative-sticky", "ck")
