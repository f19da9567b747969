"""``python -m bench``: names are checked before any benchmark runs (each takes minutes)."""

from __future__ import annotations

import pytest

from bench.__main__ import discover, main

pytestmark = pytest.mark.timeout(30)


def test_discovers_the_benchmark_modules():
    names = discover()
    assert {"appliance_latency", "cluster_latency"} <= set(names)
    assert not any(name.startswith("_") for name in names)


def test_an_option_after_a_name_is_refused_before_anything_runs(capsys):
    # cluster_latency itself would run ~10 minutes: the timeout catches that.
    assert main(["cluster_latency", "--out", "x.json"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("bench: no benchmark '--out' (benchmarks: alert_latency_cost,")
    assert "python -m bench.<name>" in err
    assert "cluster_latency ..." not in err


def test_broker_groups_is_a_benchmark_and_refuses_bad_options_before_running(capsys):
    from bench import broker_groups

    assert "broker_groups" in discover()
    assert broker_groups.main(["--session-ms", "100"]) == 2  # below Kafka's 6000 minimum
    assert "--session-ms >= 6000" in capsys.readouterr().err
