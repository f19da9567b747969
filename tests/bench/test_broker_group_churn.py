"""``bench.broker_group_churn``: the rules its figures rest on, and its quick form end to end.

The rules (``bench._churn_analysis``): when a group counts as balanced again after an
event, which consumptions are duplicates, which offsets were never consumed, which event a
gap belongs to. The quick form runs the real thing small: a fresh broker, a paced producer,
two librdkafka KIP-848 members, a join and a kill -9; nothing may be lost.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from bench import broker_group_churn
from bench._churn_analysis import (
    RECORD_DTYPE,
    Change,
    Consumed,
    Event,
    balanced,
    balanced_after,
    event_figures,
    overlaps,
)

S = 1_000_000_000  # ns


def test_balanced_means_every_partition_once_and_fair_shares():
    assert balanced([frozenset({0, 1, 2}), frozenset({3, 4, 5})], 6)
    assert balanced([frozenset({0, 1}), frozenset({2, 3}), frozenset({4}), frozenset({5})], 6)
    assert not balanced([frozenset({0, 1, 2, 3}), frozenset({4, 5})], 6)  # not fair
    assert not balanced([frozenset({0, 1, 2}), frozenset({2, 3, 4})], 6)  # 2 twice, 5 none
    assert not balanced([frozenset(range(6)), None], 6)  # a member with no callback yet


def test_a_joiner_counts_from_its_start_and_a_leaver_from_its_signal():
    half = (frozenset({0, 1, 2}), frozenset({3, 4, 5}))
    history = [Change(1 * S, "a", None), Change(2 * S, "a", frozenset(range(6))),
               Change(10 * S, "b", None),  # b subscribes: the group is unbalanced from now
               Change(11 * S, "a", half[0]), Change(12 * S, "b", half[1]),
               Change(20 * S, "b", None, gone=True), Change(26 * S, "a", frozenset(range(6)))]
    assert balanced_after(history, 5 * S, 6) == 5 * S  # nothing happening: balanced at once
    assert balanced_after(history, 10 * S, 6) == 12 * S
    assert balanced_after(history, 20 * S, 6) == 26 * S
    assert balanced_after(history[:-1], 20 * S, 6) is None  # a, alone, never took b's
    assert overlaps(history) == 0
    assert overlaps([Change(1, "a", frozenset({0, 1})), Change(2, "b", frozenset({1}))]) == 1


def _recs(rows: list[tuple[int, int, float, float]]) -> np.ndarray:
    return np.array([(p, o, int(sent * S), int(recv * S)) for p, o, sent, recv in rows],
                    dtype=RECORD_DTYPE)


def test_duplicates_missing_offsets_and_gaps_are_counted_per_event():
    rows = [(0, o, o, o + 0.001) for o in range(10)]  # partition 0: one a second, all read
    rows += [(1, 0, 0, 0.001), (1, 1, 1, 1.001), (1, 3, 3, 7.0)]  # 2 never read; a stall
    rows += [(0, 4, 4, 6.5), (0, 5, 5, 6.5)]  # re-read after the kill: duplicates
    consumed = Consumed.of(_recs(rows))
    assert consumed.missing({0: 10, 1: 4}) == {1: 1}
    history = [Change(0, "a", frozenset({0, 1}))]
    figures = event_figures(consumed, history, [Event("steady", 0), Event("kill", 5 * S)],
                            0, 10 * S, 2)
    steady, kill = figures
    assert steady["duplicates"] == 0 and kill["duplicates"] == 2
    # partition 1 went from 1.001 s to 7.0 s without a record: the gap ends in kill's window
    assert kill["longest_gap_ms"] == pytest.approx(5999, abs=1)
    assert kill["longest_gap_partition"] == 1
    assert steady["longest_gap_ms"] == pytest.approx(1000, abs=1)
    assert steady["latency"]["n"] + kill["latency"]["n"] == 13  # first consumptions only


def test_bad_options_are_refused_before_anything_runs(capsys):
    assert broker_group_churn.main(["--protocols", "eager"]) == 2
    assert "--protocols must name consumer/cooperative-sticky/range" in capsys.readouterr().err
    assert broker_group_churn.main(["--members", "8", "--partitions", "6"]) == 2


@pytest.mark.timeout(120)
def test_quick_form_end_to_end_loses_nothing(tmp_path):
    out = tmp_path / "churn.json"
    assert broker_group_churn.main(["--quick", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    (run,) = result["runs"]
    assert [e["event"] for e in run["events"]] == ["steady", "join 2/2", "kill 2->1"]
    assert all(e["balanced_s"] is not None for e in run["events"])
    assert run["records_lost"] == 0 and run["records_produced"] > 1000
    assert run["committed_at_end_equals_ends"]
    assert run["overlaps"] == 0
    assert run["producer"]["failed"] == 0
    # the killed member's partitions wait out its session: the gap says so
    kill = run["events"][-1]
    assert kill["longest_gap_ms"] >= result["session_ms"] * 0.8
