"""The creation rate's token buckets on a clock of the test's own (the broker's use of
them is tests/broker/test_client_limits.py's)."""

from __future__ import annotations

from appliance.broker.connections import rate as connection_rate
from appliance.broker.connections.rate import ConnectionRate

from support.fake_clock import FakeClock


def test_a_burst_of_one_seconds_worth_then_the_rate():
    clock = FakeClock()
    rate = ConnectionRate(10, clock=clock)
    assert [rate.take("a") for _ in range(12)] == [True] * 10 + [False] * 2
    clock.now += 0.25  # 2.5 tokens back
    assert [rate.take("a") for _ in range(3)] == [True, True, False]
    assert rate.throttled == 3


def test_throttled_connections_take_no_token():
    clock = FakeClock()
    rate = ConnectionRate(2, clock=clock)
    assert rate.take("a") and rate.take("a")
    for _ in range(1000):  # a client hammering while throttled ...
        assert not rate.take("a")
    clock.now += 0.5  # ... still gets its rate: one token in half a second
    assert rate.take("a")
    assert not rate.take("a")


def test_addresses_have_buckets_of_their_own():
    clock = FakeClock()
    rate = ConnectionRate(1, clock=clock)
    assert rate.take("a") and not rate.take("a")
    assert rate.take("b")  # b is not a's neighbour


def test_a_rate_below_one_still_admits_one_then_waits_for_a_whole_token():
    clock = FakeClock()
    rate = ConnectionRate(0.5, clock=clock)
    assert rate.take("a") and not rate.take("a")
    clock.now += 1.9
    assert not rate.take("a")
    clock.now += 0.2
    assert rate.take("a")


def test_zero_is_no_limit():
    rate = ConnectionRate(0, clock=FakeClock())
    assert all(rate.take("a") for _ in range(10_000))
    assert rate.throttled == 0 and rate.tracked() == 0


def test_refilled_buckets_are_forgotten(monkeypatch):
    monkeypatch.setattr(connection_rate, "PRUNE_EVERY", 10)
    clock = FakeClock()
    rate = ConnectionRate(5, clock=clock)
    for i in range(9):
        rate.take(f"10.0.0.{i}")
    assert rate.tracked() == 9
    clock.now += 0.5  # not yet full (a burst of 5 refills in 1 s)
    rate.take("10.0.1.0")  # the 10th take prunes: none is full yet
    assert rate.tracked() == 10
    clock.now += 1.0
    for _ in range(10):
        rate.take("10.0.2.0")  # the 20th prunes: every bucket untouched for >= 1 s goes
    assert rate.tracked() == 1
