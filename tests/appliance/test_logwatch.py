"""``appliance.process.logwatch``: waiting for a structlog event in another process's log file."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from appliance.process.logwatch import EventNotLogged, last_event, log_events, wait_for_event

# A writer like ``appliance run``: JSON events mixed with foreign lines, then it stays up.
WRITER = textwrap.dedent("""
    import json, sys, time
    log = open(sys.argv[1], "a", buffering=1)
    log.write("JVM chatter, not ours\\n")
    log.write(json.dumps({"event": "query.processing", "n": 1}) + "\\n")
    log.write("{not json\\n")
    time.sleep(0.3)
    log.write(json.dumps({"event": "query.processing", "n": 2}) + "\\n")
    log.write(json.dumps({"event": "appliance.ready", "metrics_port": 1234}) + "\\n")
    time.sleep(float(sys.argv[2]))
""")


def _writer(log, stay: float) -> subprocess.Popen:
    log.touch()
    return subprocess.Popen([sys.executable, "-c", WRITER, str(log), str(stay)])


def test_waits_for_the_event_and_returns_the_latest(tmp_path):
    log = tmp_path / "run.log"
    proc = _writer(log, 30)
    try:
        assert wait_for_event(log, "appliance.ready", proc, 60, poll=0.05) == \
            {"event": "appliance.ready", "metrics_port": 1234}
        assert wait_for_event(log, "query.processing", proc, 60)["n"] == 2
        assert [e["event"] for e in log_events(log)] == [
            "query.processing", "query.processing", "appliance.ready"]
        assert last_event(log, "query.processing")["n"] == 2
        assert last_event(log, "appliance.stopped") is None
    finally:
        proc.kill()
        proc.wait(timeout=30)


def test_an_exited_process_ends_the_wait_with_the_log_tail(tmp_path):
    log = tmp_path / "run.log"
    proc = _writer(log, 0)
    proc.wait(timeout=60)
    with pytest.raises(EventNotLogged, match=r"(?s)no appliance\.stopped \(rc=0\):\n.*"
                                             r"appliance\.ready"):
        wait_for_event(log, "appliance.stopped", proc, 600)


def test_the_wait_is_bounded(tmp_path):
    log = tmp_path / "run.log"
    proc = _writer(log, 30)
    try:
        with pytest.raises(EventNotLogged, match=r"no appliance\.stopped \(rc=None\)"):
            wait_for_event(log, "appliance.stopped", proc, 1.0)
    finally:
        proc.kill()
        proc.wait(timeout=30)
