"""The two views of the same log events: readable lines on a terminal, JSON elsewhere; and
the log file that takes the process's stderr (fd 2) so that foreign output lands there."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from support.terminal import Terminal

ROOT = Path(__file__).resolve().parents[2]

_EMIT = """
import logging, os, sys
from appliance import logs
output = logs.configure(fmt=sys.argv[1] if sys.argv[1] != "-" else None,
                        file=sys.argv[2] if len(sys.argv) > 2 else None)
log = logs.get_logger("appliance.test")
log.info("test.own", n=1)
logging.getLogger("kafka.conn").warning("connection refused %s", "x")
os.write(2, b"foreign line on fd 2\\n")  # a JVM, a child process
print("python's own stderr", file=sys.stderr)
try:
    secret_local = "s3cr3t"
    1 / 0
except ZeroDivisionError:
    log.exception("test.failed")
print(output.format.value, file=sys.stderr)
"""


def emit(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _EMIT, *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=60, check=True)


def test_json_when_stderr_is_not_a_terminal():
    lines = emit("-").stderr.splitlines()
    assert lines[-1] == "json"
    own = json.loads(lines[0])
    assert own["event"] == "test.own" and own["component"] == "appliance.test"
    assert json.loads(lines[1])["event"] == "library.log"
    failed = json.loads(next(line for line in lines if "test.failed" in line))
    assert "ZeroDivisionError" in failed["exception"]


def test_console_view_is_readable_with_the_same_event_names():
    err = emit("console").stderr
    lines = err.splitlines()
    assert lines[-1] == "console"
    assert not any(line.startswith("{") for line in lines)
    assert "test.own" in lines[0] and "component=appliance.test" in lines[0] \
        and "n=1" in lines[0]
    assert "library.log" in lines[1] and "message='connection refused x'" in lines[1]
    assert "ZeroDivisionError: division by zero" in err
    assert "s3cr3t" not in err  # plain tracebacks: no frame locals on a terminal


def test_log_file_takes_fd2_and_every_event_as_json(tmp_path):
    log_file = tmp_path / "log" / "run.log"
    err = emit("console", str(log_file)).stderr
    assert "test.own" in err and "python's own stderr" in err
    assert "foreign line on fd 2" not in err
    kept = log_file.read_text().splitlines()
    assert "foreign line on fd 2" in kept
    events = [json.loads(line)["event"] for line in kept if line.startswith("{")]
    assert events == ["test.own", "library.log", "test.failed"]


def test_auto_is_the_console_view_on_a_terminal(tmp_path):
    term = Terminal([sys.executable, "-c", _EMIT, "-"], ROOT, {"PATH": "/usr/bin:/bin"},
                    tmp_path / "terminal.txt")
    try:
        assert term.wait(timeout=60) == 0
    finally:
        term.close()
    shown = term.text()
    assert shown.splitlines()[-1] == "console"
    assert "test.own" in shown and '"event"' not in shown


def test_py4j_note_of_an_interrupted_call_is_an_expected_line():
    """Ctrl-C during the start-up interrupts a call into the JVM; py4j logs that as an
    error with a traceback on the root logger. It is what stopping then does."""
    script = """
import logging
from appliance import logs
logs.configure(fmt="console")
try:
    raise KeyboardInterrupt
except KeyboardInterrupt:
    logging.exception("KeyboardInterrupt while sending command.")
logging.exception("KeyboardInterrupt while sending command. (not py4j's words)")
"""
    err = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         cwd=ROOT, timeout=60, check=True).stderr
    first, *rest = err.splitlines()
    assert "[info" in first and "py4j.call_interrupted" in first
    assert "Traceback" not in first and "[error" in rest[0]  # only that exact line
