"""``appliance rules reload`` and ``rules stats`` when there is nothing to ask, or the wrong
process answers: one line and the documented exit code, never a traceback (both commands
fail the same way); ``rules stats`` reading a served page. (The reload itself, against a
running appliance in every trigger: tests/faults/test_rules_reload.py.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from appliance.config import Config, write_config
from appliance.observability.http import serve
from appliance.process.reload_client import ReloadClientError, reload, status_url
from appliance.process.reload_status import STATUS_PATH
from appliance.rules.book_stats import PAGE_PATH, BookStats, RuleCounts

from support.child_env import child_env
from support.ports import free_port

ROOT = Path(__file__).resolve().parents[2]


def _cli(command: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "appliance", "rules", command, *args],
                          capture_output=True, text=True, cwd=ROOT, env=child_env(), timeout=60)


#: Each command that asks the running appliance, and the page it asks.
ASKING = pytest.mark.parametrize("command,path", [("reload", STATUS_PATH),
                                                  ("stats", PAGE_PATH)])


@ASKING
def test_no_running_appliance_is_one_line_and_exit_1(tmp_path, command, path):
    port = free_port()
    config = write_config(Config.model_validate({"metrics": {"port": port}}),
                          tmp_path / "appliance.toml")
    result = _cli(command, "--config", str(config))
    assert result.returncode == 1, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and f"127.0.0.1:{port}{path}" in lines[0], result.stderr
    assert lines[0].startswith(f"rules {command}: ")
    assert "no running appliance answers" in lines[0]


@ASKING
def test_a_random_metrics_port_asks_for_the_url(tmp_path, command, path):
    config = write_config(Config.model_validate({"metrics": {"port": 0}}),
                          tmp_path / "appliance.toml")
    result = _cli(command, "--config", str(config))
    assert result.returncode == 1
    assert result.stderr.startswith(f"rules {command}: metrics.port is 0")
    assert f"--url http://HOST:PORT{path}" in result.stderr


@ASKING
def test_a_bad_config_exits_2_naming_the_key(tmp_path, command, path):
    bad = tmp_path / "appliance.toml"
    bad.write_text("[metrics]\nport = -1\n")
    result = _cli(command, "--config", str(bad))
    assert result.returncode == 2
    assert result.stderr.strip() == f"{bad}: metrics.port: must be 0..65535, 0 = any free port " \
                                    "(got -1)"


def test_rules_stats_reads_the_served_page_as_text_or_json():
    stats = BookStats(version="v7", events=10, frontier=3, rules=(
        RuleCounts("cpu-hot", evaluated=10, matched=4, index_key="metric"),
        RuleCounts("typo", evaluated=0, matched=0, index_key="metric"),
    ))
    server, port = serve([], "127.0.0.1", 0, pages={PAGE_PATH: lambda: stats.page(5)})
    try:
        url = f"http://127.0.0.1:{port}{PAGE_PATH}"
        text = _cli("stats", "--url", url, "--top", "5")
        assert text.returncode == 0, text.stderr
        assert text.stdout.startswith("rules version v7: 2 rules, 10 valid events evaluated")
        as_json = _cli("stats", "--url", url, "--json")
        assert as_json.returncode == 0, as_json.stderr
        assert BookStats.from_page(json.loads(as_json.stdout)) == stats
    finally:
        server.shutdown()
        server.server_close()


def test_status_url_connects_where_the_server_listens():
    assert status_url(Config.model_validate({"metrics": {"host": "0.0.0.0", "port": 9}})) \
        == f"http://127.0.0.1:9{STATUS_PATH}"
    assert status_url(Config.model_validate({"metrics": {"host": "::1", "port": 9}})) \
        == f"http://[::1]:9{STATUS_PATH}"


def test_the_status_page_and_metrics_share_one_port_and_a_stranger_is_refused():
    """The wrong process behind the port (``--pid``, as systemd's ExecReload passes
    $MAINPID): refused before anything is signalled."""
    page = {"pid": os.getpid(), "version": "abc", "reloads": 0, "last_reload": None}
    server, port = serve([], "127.0.0.1", 0, pages={STATUS_PATH: lambda: page})
    try:
        url = f"http://127.0.0.1:{port}{STATUS_PATH}"
        with urllib.request.urlopen(url, timeout=5) as response:
            assert json.loads(response.read()) == page
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            assert r.status == 200  # Prometheus' exposition, same listener
        with pytest.raises(ReloadClientError, match=f"served by pid {os.getpid()}, not 1"):
            reload(url, pid=1)
    finally:
        server.shutdown()
        server.server_close()
