"""``[cpus] after_ready``: from ``ready`` the appliance's own processes keep to some CPUs
for a while, leaving the others to the broker on the same host, then get every CPU back.

The notation and the refusals need no JVM; the real ``appliance run`` (its embedded broker,
its Spark driver JVM) is read from ``/proc``, thread by thread.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from appliance.config import Config
from appliance.config import write_config as write_config_file
from appliance.cpu_list import cpu_list, parse_cpu_list
from appliance.process import process_group
from appliance.process.cpu_affinity import allowed_problem, tree
from appliance.process.logwatch import log_events, wait_for_event

from support.appliance_mix import MIX_RULES
from support.child_env import child_env

ROOT = Path(__file__).resolve().parents[2]
ALLOWED = frozenset(os.sched_getaffinity(0))


@pytest.mark.parametrize("text, cpus", [
    ("", set()), ("0", {0}), ("0-2,5", {0, 1, 2, 5}), ("3, 1", {1, 3}), ("1 3-4", {1, 3, 4}),
])
def test_the_kernels_cpu_list_notation(text, cpus):
    assert parse_cpu_list(text) == cpus
    assert parse_cpu_list(cpu_list(cpus)) == cpus


def test_cpu_list_prints_ranges():
    assert cpu_list({0, 1, 2, 5, 7, 8}) == "0-2,5,7-8"
    assert cpu_list(set()) == ""


@pytest.mark.parametrize("text", ["x", "1-", "-1", "3-1", "0-99999", "1.5"])
def test_a_bad_cpu_list_is_refused(text):
    with pytest.raises(ValueError):
        parse_cpu_list(text)


def test_the_cpus_must_be_the_processes_and_not_all_of_them():
    assert allowed_problem(frozenset({0}), frozenset({0, 1})) is None
    assert "is every CPU" in allowed_problem(frozenset({0, 1}), frozenset({0, 1}))
    assert "CPU 2-3 is not one" in allowed_problem(frozenset({0, 2, 3}), frozenset({0, 1}))


def _run(config: Path, log: Path) -> subprocess.Popen:
    env = child_env()
    with log.open("ab") as out:  # the JSON log lines and the one-line errors alike
        return subprocess.Popen([sys.executable, "-m", "appliance", "run", "--config",
                                 str(config)], stdout=out, stderr=subprocess.STDOUT, env=env,
                                cwd=ROOT, start_new_session=True)


def _plain_lines(log: Path) -> list[str]:
    """What the appliance printed for a person: every line that is not a JSON log line."""
    return [line for line in log.read_text().splitlines() if not line.startswith("{")]


def _config(tmp_path: Path, cpus: dict, kafka: dict | None = None) -> Path:
    (tmp_path / "rules.yml").write_text(MIX_RULES)
    return write_config_file(Config.model_validate({
        "kafka": kafka or {"embedded_port": 0},
        "query": {"checkpoint_dir": "checkpoint", "interval": "500 milliseconds"},
        "rules": {"path": "rules.yml"}, "spark": {"master": "local[2]"},
        "metrics": {"port": 0}, **({"cpus": cpus} if cpus else {}),
    }), tmp_path / "appliance.toml")


def test_a_bad_cpu_list_in_the_file_exits_2_naming_file_and_key(tmp_path):
    config = _config(tmp_path, {})
    config.write_text(config.read_text() + '[cpus]\nafter_ready = "0-x"\n')
    proc = _run(config, tmp_path / "run.log")
    assert proc.wait(timeout=60) == 2
    lines = _plain_lines(tmp_path / "run.log")
    assert len(lines) == 1 and str(config) in lines[0] and "cpus.after_ready" in lines[0], lines


def test_every_cpu_of_the_process_exits_2_before_anything_starts(tmp_path):
    proc = _run(_config(tmp_path, {"after_ready": cpu_list(ALLOWED)}), tmp_path / "run.log")
    assert proc.wait(timeout=60) == 2
    assert _plain_lines(tmp_path / "run.log") == [
        f"cpus.after_ready: {cpu_list(ALLOWED)} is every CPU this process may use: name "
        f"fewer, so the others are left to the broker"]
    started = {e.get("event") for e in log_events(tmp_path / "run.log")}
    assert not started & {"broker.embedded", "spark.ready"}, started


def _threads_cpus(pid: int) -> set[str]:
    """The distinct ``Cpus_allowed_list`` of ``pid``'s threads."""
    out = set()
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                out |= {line.split(":", 1)[1].strip() for line in f
                        if line.startswith("Cpus_allowed_list:")}
        except OSError:
            continue  # the thread ended meanwhile
    return out


def _parent(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


@pytest.mark.spark
@pytest.mark.skipif(len(ALLOWED) < 2, reason="needs two CPUs to keep to one of them")
def test_the_jvm_keeps_to_the_cpus_from_ready_then_gets_every_cpu_back(tmp_path):
    first, every = min(ALLOWED), cpu_list(ALLOWED)
    config = _config(tmp_path, {"after_ready": str(first), "after_ready_for": "4 seconds"})
    log = tmp_path / "run.log"
    proc = _run(config, log)
    try:
        wait_for_event(log, "appliance.ready", proc, 600)
        procs = tree(proc.pid)
        # The broker only: not a child it forked a moment ago (a fork runs its parent's
        # command line until it execs: one was seen listed here, once).
        broker = [p for p in procs if " appliance broker " in _cmdline(p)
                  and " appliance broker " not in _cmdline(_parent(p))]
        jvm = [p for p in procs if _cmdline(p).startswith("/") and "java" in _cmdline(p)]
        assert len(broker) == 1 and len(jvm) == 1, [_cmdline(p) for p in procs]
        kept = next(e for e in log_events(log) if e.get("event") == "cpus.kept")
        assert kept["cpus"] == str(first) and kept["then"] == every and kept["threads"] > 20
        assert _threads_cpus(jvm[0]) == {str(first)}       # every JVM thread, tasks too
        assert _threads_cpus(proc.pid) == {str(first)}     # the runner's threads
        assert _threads_cpus(broker[0]) == {every}         # the broker is given room
        released = wait_for_event(log, "cpus.released", proc, 60)
        assert released["cpus"] == every
        assert _threads_cpus(jvm[0]) == {every}
        assert _threads_cpus(proc.pid) == {every}
        proc.terminate()
        assert proc.wait(timeout=90) == 0
    finally:
        if proc.poll() is None:
            process_group.kill(proc)
