"""What users of other command-line tools expect: ``--version``, spark-submit's ``--conf``,
and one line (not a broker's log) when the embedded broker's port is taken. None of these
needs a JVM: each answers before Spark starts."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import appliance

from support.child_env import child_env

ROOT = Path(__file__).resolve().parents[2]


def run(*argv: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *argv], capture_output=True, text=True,
                          timeout=120, env=child_env(**(env or {})), cwd=ROOT)


def test_version_of_both_commands():
    for command in ("appliance", "loadgen"):
        result = run(command, "--version")
        assert result.returncode == 0, result.stderr
        # appliance's further lines (Spark, Java...): tests/appliance/test_front_door.py
        assert result.stdout.splitlines()[0] == f"{command} {appliance.__version__}"


def test_bad_conf_argument_exits_2_with_one_line(tmp_path):
    result = run("appliance", "run", "--config", "examples/appliance.toml",
                 "--conf", "driver.memory=2g")
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "--conf driver.memory=2g: must be spark.KEY=VALUE (e.g. --conf spark.driver.memory=2g)"]


def test_conf_value_is_checked_like_the_files(tmp_path):
    result = run("appliance", "run", "--config", "examples/appliance.toml",
                 "--conf", "spark.driver.port=99999")
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "examples/appliance.toml: spark.driver_port (from --conf spark.driver.port): "
        "must be 0..65535, 0 = any free port (got 99999)"]


def test_taken_embedded_port_exits_2_naming_port_and_key(tmp_path):
    with socket.socket() as holder:  # someone else's server on the port
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        result = run("appliance", "run", "--config", "examples/appliance.toml",
                     env={"APPLIANCE_KAFKA_EMBEDDED_PORT": str(port),
                          "APPLIANCE_QUERY_CHECKPOINT_DIR": str(tmp_path / "cp"),
                          "APPLIANCE_METRICS_PORT": "0"})
    assert result.returncode == 2, result.stderr
    said = [line for line in result.stderr.splitlines() if not line.startswith("{")]
    assert said == [
        f"kafka.embedded_port: 127.0.0.1:{port} is already in use (another broker or "
        f"appliance?); set [kafka] embedded_port (or APPLIANCE_KAFKA_EMBEDDED_PORT) to a free "
        f"port, 0 for any, or bootstrap_servers to use the Kafka that is there"]
    assert '"event": "broker.ready"' not in result.stderr
    assert '"event": "spark.ready"' not in result.stderr


def test_unwritable_log_file_exits_2_with_one_line(tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("")  # a file where the log's directory would be
    result = run("appliance", "run", "--config", "examples/appliance.toml",
                 "--log-format", "console", "--log-file", str(blocked / "appliance.log"))
    assert result.returncode == 2
    [line] = result.stderr.splitlines()
    assert line.startswith(f"--log-file {blocked / 'appliance.log'}: cannot write it (")
    assert line.endswith("); name another with --log-file")
