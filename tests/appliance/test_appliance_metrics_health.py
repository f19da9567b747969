"""Recoveries, last-progress age and the progress interval: the health metrics that need
no running query."""

from __future__ import annotations

import os
import time

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from appliance.config import Config
from appliance.observability.metrics import ApplianceCollector, Snapshot, last_commit_time
from appliance.tuning import IDLE_PROGRESS_INTERVAL_MS


def _text(collector) -> str:
    registry = CollectorRegistry()
    registry.register(collector)
    return generate_latest(registry).decode()


def test_last_commit_time_is_the_newest_commit_file(tmp_path):
    assert last_commit_time(tmp_path) is None
    commits = tmp_path / "commits"
    commits.mkdir()
    for name, age in (("0", 30), ("1", 10), (".1.crc", 0)):
        path = commits / name
        path.write_text("v1\n")
        stamp = time.time() - age
        os.utime(path, (stamp, stamp))
    assert abs(last_commit_time(tmp_path) - (time.time() - 10)) < 2


def test_collector_exports_recoveries_start_time_and_progress_age():
    fresh = ApplianceCollector("continuous", recovered=False)
    text = _text(fresh)
    assert "appliance_recoveries_total 0.0" in text
    assert "appliance_start_time_seconds" in text
    assert "appliance_query_last_progress_age_seconds" not in text  # no progress yet
    assert "appliance_query_progress_interval_seconds 1.0" in text
    resumed = ApplianceCollector("realtime", recovered=True, progress_interval_s=300.0)
    resumed.snapshot = Snapshot(query_up=True, progress_age_s=1.5)
    text = _text(resumed)
    assert "appliance_recoveries_total 1.0" in text
    assert "appliance_query_last_progress_age_seconds 1.5" in text
    assert "appliance_query_progress_interval_seconds 300.0" in text


@pytest.mark.parametrize(("trigger", "interval", "seconds"), [
    ("continuous", "100 milliseconds", 0.1),
    ("realtime", "5 minutes", 300.0),
    ("microbatch", "0 seconds", 1.0),     # idle, Spark reports progress every second
    ("microbatch", "10 seconds", 10.0),
])
def test_progress_interval_follows_the_trigger(trigger, interval, seconds):
    query = Config.model_validate({"rules": {"path": "rules.yml"},
                                   "query": {"trigger": trigger, "interval": interval}}).query
    assert query.mode.progress_interval_s(query.interval, IDLE_PROGRESS_INTERVAL_MS) == seconds
