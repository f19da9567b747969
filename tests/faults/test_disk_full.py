"""The checkpoint's disk fills up (a small tmpfs this test mounts; needs root, as CI is):
the appliance reports ``query.failed`` and exits 1, the checkpoint is not corrupt, and a
restart after space is freed loses nothing."""

from __future__ import annotations

import errno
import time
from pathlib import Path

import pytest

from appliance.query.checkpoint import LOG_DIRS, entry_problem

from support.appliance_process import ApplianceProcess
from support.faults.fault_accounting import account_alerts
from support.faults.fault_kafka import wait_for_records
from support.faults.fault_knobs import knob
from support.faults.fault_process import write_config
from support.faults.loadrun import LoadThread, rules_yaml

# Several JVM starts per test: minutes each on a loaded 2-core box (the suite-wide
# pytest timeout is 600 s).
pytestmark = [pytest.mark.spark, pytest.mark.timeout(2400)]

RATE = knob(200.0, 2000.0)


@pytest.fixture
def small_disk(tmpfs):
    return tmpfs("8m")


def fill(disk: Path) -> Path:
    """Write a filler file until the disk says ENOSPC."""
    filler = disk / "filler"
    chunk = b"\0" * 65536
    with filler.open("wb", buffering=0) as out:
        for _ in range(100_000):  # bounded: 6 GB, far more than the tmpfs holds
            try:
                out.write(chunk)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
                break
    for _ in range(1000):  # the last pages: smaller writes
        try:
            with filler.open("ab", buffering=0) as out:
                out.write(b"\0" * 512)
        except OSError:
            break
    return filler


def torn_entries(checkpoint: Path) -> list[str]:
    out = []
    for log in LOG_DIRS:
        for entry in (checkpoint / log).iterdir():
            if entry.name.isdigit() and entry_problem(entry) is not None:
                out.append(f"{log}/{entry.name}: {entry_problem(entry)}")
    return out


STALL_TIMEOUT = "15 seconds"


# Continuous in `make test`: the trigger where Spark does not fail the query on a full
# checkpoint and the appliance's epoch watch has to (appliance.query.epoch_watch).
@pytest.mark.parametrize("trigger", [
    "continuous",
    pytest.param("microbatch", marks=pytest.mark.faults_long),
    pytest.param("realtime", marks=pytest.mark.faults_long),
])
def test_full_checkpoint_disk_fails_cleanly_and_restart_loses_nothing(
        trigger, broker, fault_topics, tmp_path, small_disk):
    topics = fault_topics()
    rules = tmp_path / "rules.yml"
    rules.write_text(rules_yaml())
    checkpoint = small_disk / "checkpoint"
    # Continuous: the epoch watch fails the stuck query after STALL_TIMEOUT, not the
    # default 60 s (its floor for a 500 ms interval).
    extra = {"stall_timeout": STALL_TIMEOUT} if trigger == "continuous" else {}
    config = write_config(tmp_path, broker.bootstrap, topics, trigger, checkpoint, rules,
                          **extra)
    procs = [ApplianceProcess(config, tmp_path / "run-0.log")]
    try:
        procs[-1].wait_for("query.processing")
        load = LoadThread(broker.bootstrap, topics, RATE, duration=knob(40.0, 90.0)).start()
        wait_for_records(broker.bootstrap, topics["events"])
        time.sleep(2.0)
        filler = fill(small_disk)
        full_at = time.time()
        code = procs[-1].wait_exit(timeout=300)
        failed = procs[-1].find("query.failed")
        print(f"{trigger}: disk full -> exit {code} after {time.time() - full_at:.1f} s; "
              f"cause: {(failed or {}).get('cause', '')[:300]}")
        assert code == 1, procs[-1].text()[-3000:]
        assert failed is not None and failed["cause"]
        assert torn_entries(checkpoint) == []  # no corrupt entry, at most temp files
        filler.unlink()
        restarted = time.time()
        procs.append(ApplianceProcess(config, tmp_path / "run-1.log"))
        procs[-1].wait_for("query.processing")
        report = load.join(timeout=1500)
        assert report.send_failed == 0
        result = account_alerts(broker.bootstrap, topics["alerts"], load.factory, report.sent,
                                {"restart": restarted})
        print(result.line(f"disk full, {trigger} at {RATE:g}/s"))
        assert result.lost == [], result.lost[:20]
        assert procs[-1].terminate() == 0
    finally:
        for proc in procs:
            proc.cleanup()
