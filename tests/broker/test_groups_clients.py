"""Consumer groups with each real client: confluent-kafka (librdkafka) and kafka-python
members as subprocesses, Java kafka-clients 3.9.1 members as JVMs (group_harness.py). The
same cases for every client; what differs per client (the assignors it has, which one each
case runs) is one row of ``CLIENTS``."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import pytest

from support.broker.group_harness import (
    java_member,
    python_member,
    run_assignor_round,
    run_group_lifecycle,
    run_partitions_added,
    run_static_restart,
)


@dataclass(frozen=True)
class Client:
    name: str                   # group_member.py's name for it; the report's
    label: str                  # in the topic and group names of the shared broker
    assignors: tuple[str, ...]  # every assignor the client has
    lifecycle: str              # the assignor of each case below
    static_restart: str
    partitions_added: str
    java: bool = False          # members are JVMs running tests/broker/java/GroupMember


ALL_ASSIGNORS = ("range", "roundrobin", "sticky", "cooperative-sticky")
CLIENTS = (
    # librdkafka's assignors: it has no eager "sticky"
    Client("confluent", "ck", ("range", "roundrobin", "cooperative-sticky"),
           lifecycle="cooperative-sticky", static_restart="range",
           partitions_added="cooperative-sticky"),
    Client("kafka-python", "kp", ALL_ASSIGNORS, lifecycle="range", static_restart="range",
           partitions_added="roundrobin"),
    Client("java", "java", ALL_ASSIGNORS, lifecycle="cooperative-sticky",
           static_restart="sticky", partitions_added="range", java=True),
)


def _param(client: Client, *values, suffix: str = ""):
    marks = [pytest.mark.java] if client.java else []
    return pytest.param(client, *values, marks=marks, id=client.name + suffix)


EACH_CLIENT = [_param(c) for c in CLIENTS]
EACH_ASSIGNOR = [_param(c, a, suffix=f"-{a}") for c in CLIENTS for a in c.assignors]


@pytest.fixture
def launch(request):
    """``launch(...) -> argv`` of one member process of the test's client."""
    client = request.node.callspec.params["client"]
    if client.java:
        return partial(java_member, request.getfixturevalue("java_checks"))
    return partial(python_member, client.name)


@pytest.mark.parametrize("client", EACH_CLIENT)
def test_group_lifecycle(tmp_path, client, launch):
    report = run_group_lifecycle(tmp_path, launch, client.lifecycle, client.name)
    print(f"\n{client.name}: join rebalance {report.join_rebalance_s:.1f} s, crash reassigned "
          f"in {report.crash_reassign_s:.1f} s, generations {report.generations}")


@pytest.mark.parametrize("client, assignor", EACH_ASSIGNOR)
def test_assignors(group_broker, tmp_path, client, assignor, launch):
    run_assignor_round(group_broker, tmp_path, launch, assignor, client.label)


@pytest.mark.parametrize("client", EACH_CLIENT)
def test_static_member_restart(group_broker, tmp_path, client, launch):
    run_static_restart(group_broker, tmp_path, launch, client.static_restart, client.label)


@pytest.mark.parametrize("client", EACH_CLIENT)
def test_partitions_added(group_broker, tmp_path, client, launch):
    run_partitions_added(group_broker, tmp_path, launch, client.partitions_added, client.label)
