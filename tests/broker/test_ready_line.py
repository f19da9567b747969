"""``read_until_line``: a child's ready line on its stdout pipe, bounded in time."""

from __future__ import annotations

import subprocess
import sys

from appliance.broker.ready_line import read_until_line


def _child(code: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)


def test_the_ready_line_and_the_lines_before_it():
    proc = _child("import sys, time\n"
                  "print('metrics url=http://x', flush=True)\n"
                  "time.sleep(0.3)\n"
                  "print('ready at=1:2', flush=True)\n"
                  "print('after', flush=True)\n"
                  "time.sleep(30)\n")
    try:
        line, lines = read_until_line(proc.stdout, "ready at=", 60)
        assert line == "ready at=1:2"
        assert lines[-2:] == ["metrics url=http://x", "ready at=1:2"]
    finally:
        proc.kill()
        proc.wait(timeout=30)


def test_a_ready_line_written_in_two_pieces_is_read_whole():
    proc = _child("import sys, time\n"
                  "sys.stdout.write('ready bootstrap=127.0.0.1:4'); sys.stdout.flush()\n"
                  "time.sleep(0.5)\n"
                  "sys.stdout.write('2345\\n'); sys.stdout.flush()\n"
                  "time.sleep(30)\n")
    try:
        line, lines = read_until_line(proc.stdout, "ready bootstrap=", 60)
        assert line == "ready bootstrap=127.0.0.1:42345" and lines == [line]
    finally:
        proc.kill()
        proc.wait(timeout=30)


def test_a_child_that_exits_first_ends_the_wait():
    proc = _child("print('starting'); print('failed')")
    try:
        assert read_until_line(proc.stdout, "ready", 600) == (None, ["starting", "failed"])
    finally:
        proc.wait(timeout=30)


def test_a_silent_child_times_out():
    proc = _child("import time; time.sleep(30)")
    try:
        assert read_until_line(proc.stdout, "ready", 0.5) == (None, [])
    finally:
        proc.kill()
        proc.wait(timeout=30)
