"""``bench.rules_match_cost``'s figures and refusals, without a JVM: a run's figure leaves
out its warm-up rounds, a count's is the median of its runs', every run and its cold first
round stay in the table, and bad options cost no run."""

from __future__ import annotations

import pytest

from bench.rules_match_cost import main, markdown, summarize


def _run(rounds: list[float], candidates: float = 50.0) -> dict:
    return {"rules": 10000, "candidates_per_event": candidates, "index": "keys=[metric]",
            "ns_per_event": rounds}


def test_a_run_leaves_out_its_warmup_and_a_count_takes_the_median_run():
    runs = [_run([900.0, 400.0, 120.0, 110.0, 100.0]),
            _run([800.0, 300.0, 130.0, 140.0, 135.0]),
            _run([700.0, 200.0, 500.0, 90.0, 95.0])]
    cell = summarize(10000, runs, warmup=2)
    assert cell["runs_ns_per_event"] == [110.0, 135.0, 95.0]
    assert cell["ns_per_event"] == 110.0
    assert cell["first_round_ns_per_event"] == [900.0, 800.0, 700.0]
    assert cell["candidates_per_event"] == 50.0


def test_the_table_shows_each_run_and_the_ratio_to_one_rule():
    one = {**summarize(1, [_run([50.0, 40.0], 1.0)], warmup=1), "ratio_to_one_rule": 1.0}
    many = {**summarize(10000, [_run([900.0, 80.0])], warmup=1), "ratio_to_one_rule": 2.0}
    table = markdown({"command": "python -m bench.rules_match_cost", "note": "n",
                      "cells": [one, many]})
    assert "| 10,000 | 50 | 80 (80) | x2.0 | 900 |" in table
    assert "| 1 | 1 | 40 (40) | x1.0 | 50 |" in table


@pytest.mark.parametrize("argv", [["--runs", "0"], ["--warmup", "8", "--rounds", "8"],
                                  ["--counts", "0"], ["--seconds", "0"],
                                  ["--connector-jar", "/nonexistent/connector.jar"]])
def test_bad_options_exit_2_before_any_run(argv, capsys):
    assert main(argv) == 2
    assert "bench.rules_match_cost" in capsys.readouterr().err
