"""``appliance dashboards publish`` against a stand-in Grafana API (see grafana_standin.py)."""

from __future__ import annotations

import base64
import json
import os
import socket
import subprocess
import sys

import pytest

from appliance.cli import main
from dashboards import catalog

from support.grafana_standin import GrafanaStandIn

TOKEN = "glsa_test_token_not_a_secret"


@pytest.fixture
def grafana():
    with GrafanaStandIn() as g:
        yield g


@pytest.fixture
def env(monkeypatch):
    for name in ("GRAFANA_URL", "GRAFANA_TOKEN", "GRAFANA_USER", "GRAFANA_PASSWORD"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def _publish(capsys, *args) -> tuple[int, list[str], str]:
    code = main(["dashboards", "publish", *args])
    out = capsys.readouterr()
    return code, [line for line in out.err.splitlines() if line], out.out


def test_publish_creates_folder_datasource_and_dashboards_then_changes_nothing(
        grafana, env, capsys):
    env.setenv("GRAFANA_TOKEN", TOKEN)
    code, err, out = _publish(capsys, "--url", grafana.url)
    assert code == 0, err
    boards = catalog.load()
    state = grafana.state
    # Every request carried the token, and only the token (no basic auth, nothing in URLs).
    assert {r.authorization for r in state.requests} == {f"Bearer {TOKEN}"}
    assert all(TOKEN not in r.path for r in state.requests)
    calls = [(r.method, r.path) for r in state.requests]
    assert calls == [("GET", f"/api/folders/{catalog.FOLDER_UID}"), ("POST", "/api/folders"),
                     ("GET", f"/api/datasources/uid/{catalog.DATASOURCE_UID}"),
                     ("POST", "/api/datasources")] + \
        [call for b in boards for call in (("GET", f"/api/dashboards/uid/{b.uid}"),
                                           ("POST", "/api/dashboards/db"))]
    folder = state.requests[1].body
    assert folder == {"title": catalog.FOLDER_TITLE, "uid": catalog.FOLDER_UID}
    datasource = state.requests[3].body
    assert datasource["uid"] == catalog.DATASOURCE_UID and datasource["type"] == "prometheus"
    assert datasource["url"].startswith("http")
    uploads = [r.body for r in state.requests[4:] if r.method == "POST"]
    assert {u["dashboard"]["uid"] for u in uploads} == {b.uid for b in boards}
    for upload in uploads:
        assert upload["overwrite"] is True and upload["folderUid"] == catalog.FOLDER_UID
        committed = json.loads((catalog.JSON_DIR / f"{upload['dashboard']['uid']}.json")
                               .read_text())
        assert upload["dashboard"] == committed  # the committed JSON, unchanged
        for panel in upload["dashboard"]["panels"]:
            if panel["type"] != "row":
                assert panel["datasource"]["uid"] == catalog.DATASOURCE_VARIABLE
    last = out.splitlines()[-1]
    assert last.startswith(f"published {len(boards)} dashboards to {grafana.url}: ")
    assert "folder created" in last and "datasource created" in last

    # Second publish: everything is as wanted, so nothing is written and it says so.
    first = len(state.requests)
    code, err, out = _publish(capsys, "--url", grafana.url)
    assert code == 0, err
    again = state.requests[first:]
    assert {r.method for r in again} == {"GET"}, [(r.method, r.path) for r in again]
    assert set(state.versions.values()) == {1}
    assert out.splitlines()[-1] == f"published {len(boards)} dashboards to {grafana.url}: unchanged"


def test_publish_points_the_datasource_at_the_given_prometheus_and_redoes_what_differs(
        grafana, env, capsys):
    env.setenv("GRAFANA_TOKEN", TOKEN)
    prometheus = "http://10.0.0.12:9090"
    code, err, out = _publish(capsys, "--url", grafana.url, "--prometheus-url", prometheus)
    assert code == 0, err
    state = grafana.state
    assert state.datasources[catalog.DATASOURCE_UID]["url"] == prometheus
    code, err, out = _publish(capsys, "--url", grafana.url, "--prometheus-url", prometheus)
    assert code == 0 and out.splitlines()[-1].endswith(": unchanged"), (err, out)

    # Prometheus moved: only the datasource is updated (its other settings kept).
    first = len(state.requests)
    moved = "http://10.0.0.13:9090"
    code, err, out = _publish(capsys, "--url", grafana.url, "--prometheus-url", moved)
    assert code == 0, err
    writes = [(r.method, r.path) for r in state.requests[first:] if r.method != "GET"]
    assert writes == [("PUT", f"/api/datasources/uid/{catalog.DATASOURCE_UID}")]
    updated = state.datasources[catalog.DATASOURCE_UID]
    assert updated["url"] == moved and updated["type"] == "prometheus"
    assert updated["jsonData"]["timeInterval"]
    assert out.splitlines()[-1].endswith(": datasource updated"), out

    # Someone edited a dashboard in Grafana: that one is put back, the others left alone.
    board = catalog.load()[0]
    state.dashboards[board.uid]["dashboard"]["title"] = "edited by hand"
    first = len(state.requests)
    code, err, out = _publish(capsys, "--url", grafana.url, "--prometheus-url", moved)
    assert code == 0, err
    writes = [r for r in state.requests[first:] if r.method != "GET"]
    assert [w.body["dashboard"]["uid"] for w in writes] == [board.uid]
    assert state.dashboards[board.uid]["dashboard"]["title"] == board.title
    assert out.splitlines()[-1].endswith(f": dashboard {board.uid} updated"), out


def test_publish_basic_auth_from_env_and_url_from_env(grafana, env, capsys):
    env.setenv("GRAFANA_URL", grafana.url)
    env.setenv("GRAFANA_USER", "ops")
    env.setenv("GRAFANA_PASSWORD", "s3cret")
    code, err, _out = _publish(capsys)
    assert code == 0, err
    expected = "Basic " + base64.b64encode(b"ops:s3cret").decode()
    assert {r.authorization for r in grafana.state.requests} == {expected}


def test_publish_401_is_exit_1_with_one_line(grafana, env, capsys):
    env.setenv("GRAFANA_TOKEN", TOKEN)
    grafana.state.status = 401
    code, err, _out = _publish(capsys, "--url", grafana.url)
    assert code == 1
    assert len(err) == 1 and "401" in err[0] and "GRAFANA_TOKEN" in err[0]
    assert TOKEN not in err[0]


def test_publish_5xx_is_exit_1_with_one_line(grafana, env, capsys):
    env.setenv("GRAFANA_TOKEN", TOKEN)
    grafana.state.status = 503
    code, err, _out = _publish(capsys, "--url", grafana.url)
    assert code == 1 and len(err) == 1 and "503" in err[0]


def test_publish_unreachable_is_exit_1_with_one_line(env, capsys):
    with socket.socket() as s:  # a port nobody listens on: bound, never listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        env.setenv("GRAFANA_TOKEN", TOKEN)
        code, err, _out = _publish(capsys, "--url", f"http://127.0.0.1:{port}")
    assert code == 1 and len(err) == 1 and "unreachable" in err[0]


@pytest.mark.parametrize("args, environ, word", [
    ([], {"GRAFANA_TOKEN": TOKEN}, "--url"),
    (["--url", "http://127.0.0.1:3000"], {}, "GRAFANA_TOKEN"),
    (["--url", "http://admin:admin@127.0.0.1:3000"], {"GRAFANA_TOKEN": TOKEN},
     "credentials"),
    (["--url", "ftp://x"], {"GRAFANA_TOKEN": TOKEN}, "--url"),
])
def test_publish_bad_arguments_exit_2(args, environ, word, env, capsys):
    for name, value in environ.items():
        env.setenv(name, value)
    code, err, _out = _publish(capsys, *args)
    assert code == 2 and len(err) == 1 and word in err[0]


def test_publish_is_wired_as_an_appliance_subcommand(grafana, env):
    """The installed `appliance` CLI finds the plugin through its entry point."""
    run_env = {k: v for k, v in os.environ.items() if not k.startswith("GRAFANA_")}
    run_env["GRAFANA_TOKEN"] = TOKEN
    done = subprocess.run([sys.executable, "-m", "appliance", "dashboards", "publish",
                           "--url", grafana.url], capture_output=True, text=True,
                          env=run_env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert len(grafana.state.dashboards) == len(catalog.load())
