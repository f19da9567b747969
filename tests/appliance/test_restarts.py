"""The in-place restart policy: which failures it covers, and its budget over time."""

from __future__ import annotations

import pytest

from appliance.process.restarts import (
    IN_PLACE_CAUSES,
    WINDOW_S,
    InPlaceRestarts,
    RestartBudget,
    in_place_cause,
)

from support.fake_clock import FakeClock

#: The message a continuous query died with when one executor JVM of two was killed on the
#: test cluster (bench.cluster_latency's log), plan dump dropped as the appliance logs it.
EXECUTOR_KILLED = (
    "Job aborted due to stage failure: Task 1 in stage 3.0 failed 1 times, most recent "
    "failure: Lost task 1.0 in stage 3.0 (TID 7) (127.0.0.1 executor 0): ExecutorLostFailure "
    "(executor 0 exited caused by one of the running tasks) Reason: Command exited with code "
    "137 Driver stacktrace:")


def test_a_lost_executor_is_restarted_in_place_with_its_reason():
    cause = in_place_cause(EXECUTOR_KILLED)
    assert cause is not None and cause in IN_PLACE_CAUSES
    assert "executor" in cause.reason


@pytest.mark.parametrize("failure", [
    # What a new query in the same process would meet again: a fresh process is the remedy.
    "no epoch committed for 61 s while the query runs (last committed epoch 12): Spark's "
    "epoch coordinator is stuck",
    "Spark driver unreachable: An error occurred while calling o42.awaitTermination",
    "Job aborted due to stage failure: Task 0 in stage 2.0 failed 1 times, most recent "
    "failure: Lost task 0.0 (TID 3): org.apache.kafka.common.errors.TimeoutException: "
    "Topic events not present in metadata after 60000 ms.",
    "query terminated",
])
def test_other_failures_need_a_fresh_process(failure):
    assert in_place_cause(failure) is None


def test_budget_allows_limit_restarts_per_window_then_again_once_they_age_out():
    clock = FakeClock()
    budget = RestartBudget(limit=2, clock=clock)
    assert budget.take() and budget.used == 1
    clock.now += 100
    assert budget.take() and budget.used == 2
    clock.now += 100
    assert not budget.take() and budget.used == 2  # a refusal spends nothing
    clock.now += WINDOW_S - 200  # the first restart is now a window old
    assert budget.take() and budget.used == 2
    assert not budget.take()


def test_a_zero_budget_never_restarts():
    assert not RestartBudget(limit=0, clock=FakeClock()).take()


def test_in_place_restarts_start_a_lost_executors_query_again_within_the_budget():
    told, started = [], []
    restarts = InPlaceRestarts(RestartBudget(limit=1, clock=FakeClock()), told.append)
    assert restarts.attempt(EXECUTOR_KILLED, lambda: started.append(1)) is True
    assert (told, started) == ([1], [1])
    # the budget is spent: no second start, a fresh process is next
    assert restarts.attempt(EXECUTOR_KILLED, lambda: started.append(2)) is False
    assert (told, started) == ([1], [1])


def test_in_place_restarts_refuse_other_causes_and_a_failing_start():
    started = []
    restarts = InPlaceRestarts(RestartBudget(limit=3, clock=FakeClock()), lambda n: None)
    assert restarts.attempt("Spark driver unreachable: gone", lambda: started.append(1)) is False
    assert started == []

    def fails() -> None:
        raise RuntimeError("the replacement executor's slots never came")

    assert restarts.attempt(EXECUTOR_KILLED, fails) is False
