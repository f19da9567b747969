"""The continuous query's stall watch over a real checkpoint directory (a clock of our own:
the disk-full fault test covers it against Spark, see tests/faults/test_disk_full.py)."""

from __future__ import annotations

from pathlib import Path

from appliance.config import STALL_MIN_S, QueryConfig
from appliance.query.epoch_watch import EpochWatch, latest_commit, watch_for
from appliance.trigger import trigger_mode

from support.fake_clock import FakeClock


def commit(checkpoint: Path, epoch: int) -> None:
    (checkpoint / "commits").mkdir(parents=True, exist_ok=True)
    (checkpoint / "commits" / str(epoch)).write_text('v1\n{"nextBatchWatermarkMs":0}')


def test_latest_commit_ignores_temp_and_crc_files(tmp_path):
    assert latest_commit(tmp_path) is None
    commit(tmp_path, 9)
    commit(tmp_path, 10)
    (tmp_path / "commits" / ".11.0b1c.tmp").write_text("")
    (tmp_path / "commits" / ".10.crc").write_text("")
    assert latest_commit(tmp_path) == 10


def stall_timeout_s(interval: str, configured: str | None = None) -> float:
    return QueryConfig(interval=interval, stall_timeout=configured).stall_timeout_s


def test_timeout_is_a_floor_or_many_intervals_unless_configured():
    assert stall_timeout_s("500 milliseconds") == STALL_MIN_S
    assert stall_timeout_s("60 seconds") == 20 * 60.0
    assert stall_timeout_s("500 milliseconds", "15 seconds") == 15.0  # [query] stall_timeout


def test_new_commits_keep_it_quiet_and_silence_past_the_timeout_is_reported(tmp_path):
    clock = FakeClock()
    commit(tmp_path, 3)
    watch = EpochWatch(tmp_path, timeout_s=60.0, clock=clock)
    for epoch in range(4, 10):  # an epoch every 50 s: each one resets the silence
        clock.now += 50
        commit(tmp_path, epoch)
        assert watch.stalled() is None
    clock.now += 59
    assert watch.stalled() is None
    clock.now += 2
    cause = watch.stalled()
    assert cause is not None
    assert "no epoch committed for 61 s" in cause and "last committed epoch 9" in cause
    assert str(tmp_path) in cause and "bytes free" in cause
    commit(tmp_path, 10)  # it commits again: no longer stuck
    assert watch.stalled() is None


def test_a_query_that_never_committed_in_this_run_is_timed_from_the_start(tmp_path):
    clock = FakeClock()
    watch = EpochWatch(tmp_path, timeout_s=60.0, clock=clock)
    clock.now += 61
    assert "last committed epoch None" in watch.stalled()


def test_only_a_query_that_commits_every_interval_is_watched(tmp_path):
    watched = {t: watch_for(trigger_mode(t), str(tmp_path), 60.0)
               for t in ("continuous", "realtime", "microbatch")}
    assert watched["realtime"] is None and watched["microbatch"] is None
    watch = watched["continuous"]
    assert isinstance(watch, EpochWatch)
    assert (watch.checkpoint_dir, watch.timeout_s) == (tmp_path, 60.0)
