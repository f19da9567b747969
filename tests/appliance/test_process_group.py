"""``appliance.process.process_group``: a stop ends what the process left behind in its group."""

from __future__ import annotations

import subprocess
import sys
import time

from appliance.process import process_group

# A leader that starts a child in its group and dies on SIGTERM without stopping it: the
# shape of pyspark's driver and its JVM when Python is killed first.
LEADER = ("import subprocess, sys, time; "
          "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)']); "
          "print('up', flush=True); time.sleep(300)")


def _start() -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", LEADER], stdout=subprocess.PIPE,
                            text=True, start_new_session=True)
    assert proc.stdout.readline().strip() == "up"
    return proc


def test_stop_terms_the_leader_then_kills_what_it_left():
    proc = _start()
    try:
        assert len(process_group.live_members(proc.pid)) == 2
        started = time.monotonic()
        assert process_group.stop(proc, grace=20) == -15  # SIGTERM ended the leader
        assert time.monotonic() - started < 15  # no waiting out the grace
        process_group.wait_gone(proc.pid, timeout=10)  # and the orphaned child is gone
    finally:
        process_group.kill(proc)


def test_kill_and_signals_tolerate_a_group_that_is_gone():
    proc = _start()
    assert process_group.kill(proc) == -9
    process_group.wait_gone(proc.pid, timeout=10)
    process_group.signal_group(proc.pid, 15)  # no ProcessLookupError: zombies may remain
    assert process_group.stop(proc) == -9  # already reaped: reports the old status
