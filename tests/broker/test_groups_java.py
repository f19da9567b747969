"""Consumer groups with the Java kafka-clients 3.9.1: members as real JVMs."""

from __future__ import annotations

from functools import partial

import pytest
from group_harness import (
    group_broker,
    java_member,
    run_assignor_round,
    run_group_lifecycle,
    run_partitions_added,
    run_static_restart,
)

pytestmark = pytest.mark.java


@pytest.fixture(scope="module")
def gbroker(tmp_path_factory):
    with group_broker(tmp_path_factory.mktemp("java-groups")) as b:
        yield b


def test_java_group_lifecycle(tmp_path, java_checks):
    report = run_group_lifecycle(tmp_path, partial(java_member, java_checks),
                                 "cooperative-sticky", "java")
    print(f"\njava: join rebalance {report.join_rebalance_s:.1f} s, crash reassigned "
          f"in {report.crash_reassign_s:.1f} s, generations {report.generations}")


@pytest.mark.parametrize("assignor", ["range", "roundrobin", "sticky", "cooperative-sticky"])
def test_java_assignors(gbroker, tmp_path, java_checks, assignor):
    run_assignor_round(gbroker, tmp_path, partial(java_member, java_checks), assignor, "java")


def test_java_static_member_restart(gbroker, tmp_path, java_checks):
    run_static_restart(gbroker, tmp_path, partial(java_member, java_checks), "sticky", "java")


def test_java_partitions_added(gbroker, tmp_path, java_checks):
    run_partitions_added(gbroker, tmp_path, partial(java_member, java_checks), "range", "java")
