"""A stable classic group survives the broker's restart as Kafka's does: the coordinator
reloads the group's last metadata record, so members that heartbeat within their session
keep their member ids, generation and partitions, and nothing rebalances. (Before, the
restarted broker knew only the generation: every member got UNKNOWN_MEMBER_ID, rejoined,
and lost its partitions; an active/standby pair elected through a group fenced its
active at every broker restart.) A member that does not come back expires after its
session, and the others then rebalance as usual."""

from __future__ import annotations

import threading
import time

import pytest
from kafka import KafkaConsumer

from appliance.broker import EmbeddedBroker
from appliance.process.logwatch import log_events

TOPIC = "restart4"
SESSION_MS = 6000
BOUND_S = 30  # every wait below is bounded by this


@pytest.fixture
def rbroker(tmp_path):
    b = EmbeddedBroker(topics={TOPIC: 4}, data_dir=tmp_path / "data",
                       log_path=tmp_path / "broker.log")
    b.start()
    yield b
    b.stop()


class Member:
    """One kafka-python member polling on its own thread (as a consumer's poll loop
    does); ``state`` is its member id, generation and partitions after its last poll."""

    def __init__(self, bootstrap: str, group: str, name: str) -> None:
        self.consumer = KafkaConsumer(
            bootstrap_servers=bootstrap, group_id=group, client_id=name,
            session_timeout_ms=SESSION_MS, heartbeat_interval_ms=500,
            enable_auto_commit=False, reconnect_backoff_max_ms=500)
        self.consumer.subscribe([TOPIC])
        self.state: tuple[str, int, frozenset[int]] = ("", -1, frozenset())
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        c = self.consumer
        while not self._stop.is_set():
            c.poll(timeout_ms=100)
            meta = c.group_metadata()
            self.state = (meta.member_id, meta.generation_id,
                          frozenset(tp.partition for tp in c.assignment()))

    def close(self, timeout_ms: int | None = None) -> None:
        self._stop.set()
        self._thread.join(timeout=BOUND_S)
        self.consumer.close(autocommit=False, timeout_ms=timeout_ms)


def _states(members: list[Member]) -> list[tuple[str, int, frozenset[int]]]:
    return [m.state for m in members]


def _wait_until(members: list[Member], done, what: str) -> None:
    deadline = time.monotonic() + BOUND_S
    while time.monotonic() < deadline:
        if done():
            return
        time.sleep(0.1)
    pytest.fail(f"not within {BOUND_S} s: {what}: {_states(members)}")


def test_a_stable_group_keeps_its_members_and_partitions_across_a_broker_restart(
        rbroker, tmp_path):
    group = f"restart-{time.monotonic_ns()}"
    members = [Member(rbroker.bootstrap, group, n) for n in ("a", "b")]
    try:
        _wait_until(members, lambda: sorted(len(p) for _m, _g, p in _states(members)) == [2, 2]
                    and len({g for _m, g, _p in _states(members)}) == 1,
                    "two members sharing four partitions")
        time.sleep(1.0)  # settled
        before = _states(members)
        log = tmp_path / "broker.log"
        rebalances = sum(e.get("event") == "broker.group_rebalance_started"
                         for e in log_events(log))

        rbroker.kill()  # kill -9: the stable group was written when it became stable
        rbroker.start()
        # Longer than a session: a member the broker had forgotten would be told so at its
        # next heartbeat, rejoin and move to a new generation.
        time.sleep(SESSION_MS / 1000 + 2)
        assert _states(members) == before
        events = log_events(log)
        assert any(e.get("event") == "broker.group_restored" and e.get("group") == group
                   for e in events)
        assert sum(e.get("event") == "broker.group_rebalance_started"
                   for e in events) == rebalances

        # A member that does not come back lapses after its session: the other takes its
        # partitions in the next generation.
        rbroker.kill()
        members.pop().close(timeout_ms=2000)  # gone while Kafka was
        rbroker.start()
        _wait_until(members, lambda: len(_states(members)[0][2]) == 4,
                    "the remaining member owning every partition")
        assert _states(members)[0][1] > before[0][1]
    finally:
        for m in members:
            m.close()
