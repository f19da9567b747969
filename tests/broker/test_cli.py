"""``appliance broker``: ready line, clean stop on signals, exit codes, start-up topics."""

from __future__ import annotations

import argparse
import json
import select
import signal
import socket
import subprocess
import sys

import pytest

from appliance.broker import EmbeddedBroker
from appliance.broker.cli import add_broker_options
from appliance.broker.wire import schemas
from appliance.broker.wire.client import WireClient

from support.wire_helpers import batch, produce

ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]


def _start(*args: str, timeout_s: float = 30) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", "appliance", "broker", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    ready, _, _ = select.select([proc.stdout], [], [], timeout_s)
    line = proc.stdout.readline() if ready else ""  # the broker flushes whole lines
    return proc, line


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_ready_line_then_clean_exit_on_signal(sig):
    proc, line = _start("--port", "0")
    try:
        assert line.startswith("broker ready bootstrap=127.0.0.1:")
        port = int(line.strip().rpartition(":")[2])
        assert port > 0
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=15)
    finally:
        proc.kill()
    assert proc.returncode == 0
    assert out == ""  # exactly one stdout line: the ready line
    events = [json.loads(x)["event"] for x in err.splitlines() if x.startswith("{")]
    assert events[0] == "broker.ready" and events[-1] == "broker.stopped"


def test_port_in_use_exits_1_with_a_log_line():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        proc = subprocess.run([sys.executable, "-m", "appliance", "broker", "--port",
                               str(port)], capture_output=True, text=True, timeout=30, cwd=ROOT)
    assert proc.returncode == 1
    assert "broker.bind_failed" in proc.stderr


@pytest.mark.parametrize("args", [["--topics", "x:0"], ["--flush", "sometimes"],
                                  ["--retention-ms", "-5"], ["--topics", "bad/name:1"],
                                  ["--group-min-session-timeout-ms", "9000",
                                   "--group-max-session-timeout-ms", "8000"],
                                  ["--group-initial-rebalance-delay-ms", "-1"]])
def test_bad_options_exit_2_naming_the_option(args):
    proc = subprocess.run([sys.executable, "-m", "appliance", "broker", "--port", "0", *args],
                          capture_output=True, text=True, timeout=30, cwd=ROOT)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert args[0] in proc.stderr.strip().splitlines()[-1]  # the last line names the option


@pytest.mark.parametrize(("args", "message"), [
    (["--max-groups", "20s"], "argument --max-groups: must be a whole number, got '20s'"),
    (["--max-groups", "0"], "argument --max-groups: must be at least 1, got 0"),
    (["--retention-bytes", "-2"],
     "argument --retention-bytes: must be at least -1 (-1: no limit), got -2"),
    (["--max-connection-creation-rate-per-ip", "fast"],
     "argument --max-connection-creation-rate-per-ip: must be a number, got 'fast'"),
    (["--port", "70000"], "argument --port: must be 0..65535 (0: any free port), got 70000"),
])
def test_a_bad_number_says_what_is_expected(args, message, capsys):
    """The broker's numeric flags use the appliance's validators: the error names the flag
    and the range, not the validator's function name."""
    parser = argparse.ArgumentParser(prog="appliance broker")
    add_broker_options(parser)
    with pytest.raises(SystemExit) as exit_info:
        parser.parse_args(args)
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith(message)


def test_data_dir_that_is_a_file_exits_2(tmp_path):
    f = tmp_path / "file"
    f.write_text("not a directory")
    proc = subprocess.run([sys.executable, "-m", "appliance", "broker", "--port", "0",
                           "--data-dir", str(f)], capture_output=True, text=True, timeout=30,
                          cwd=ROOT)
    assert proc.returncode == 2
    assert "--data-dir" in proc.stderr


def test_startup_topics_and_auto_create_flag():
    with EmbeddedBroker(topics={"events": 2, "alerts": 1},
                        extra_args=["--auto-create-topics", "--default-partitions", "3"]) as b:
        with WireClient(b.bootstrap) as c:
            meta = c.request(schemas.METADATA, 9, {"topics": None,
                                                   "allow_auto_topic_creation": False})
            assert {t["name"]: len(t["partitions"]) for t in meta["topics"]} == {
                "events": 2, "alerts": 1}
            assert produce(c, "fresh", 0, batch([b"x"]))["error_code"] == 0
            meta = c.request(schemas.METADATA, 9, {"topics": [{"name": "fresh"}],
                                                   "allow_auto_topic_creation": True})
            assert len(meta["topics"][0]["partitions"]) == 3
