"""The deploy's preflight on the controller alone: no test bed, no root.

The preflight play (`--tags preflight`) against an inventory whose every group is this
machine (nothing is deployed: the roles' plays do not run under that tag). It validates
every role's arguments and loads the appliance.toml the appliance role would install with
the appliance's own ``load_config``: a real-time deploy with the role's defaults must
pass (its interval is the trigger's own default), an interval the real-time trigger
refuses must stop the run with the appliance's one line, naming the field.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ANSIBLE_DIR = Path(__file__).resolve().parents[2] / "ansible"
VENV_BIN = Path(sys.executable).parent
GROUPS = ("spark_master", "spark_workers", "kafka", "appliance", "monitoring")


@pytest.fixture(scope="module")
def inventory(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("preflight") / "hosts.yml"
    host = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
            "cluster_address": "127.0.0.1"}
    path.write_text(yaml.safe_dump({"all": {
        "vars": {"spark_auth_secret": "a-test-secret-of-32-characters.."},
        "hosts": {"controller": host},
        "children": {group: {"hosts": {"controller": None}} for group in GROUPS}}}))
    return path


def _preflight(inventory: Path, *extra: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0",
               PATH=f"{VENV_BIN}:{os.environ.get('PATH', '')}")
    # The wheelhouse (packages) and the rules' Spark analysis are not what is tested.
    return subprocess.run(
        [str(VENV_BIN / "ansible-playbook"), "-i", str(inventory), "site.yml",
         "--tags", "preflight", "--skip-tags", "packages,rules_check", *extra],
        cwd=ANSIBLE_DIR, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("trigger", ["realtime", "microbatch", "continuous"])
def test_every_trigger_with_the_defaults_passes_the_preflight(inventory, trigger):
    run = _preflight(inventory, "-e", f"appliance_trigger={trigger}")
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert "The rendered appliance.toml is valid" in run.stdout
    assert "changed=0" in run.stdout and "failed=0" in run.stdout


def test_an_interval_the_realtime_trigger_refuses_stops_the_preflight(inventory):
    run = _preflight(inventory, "-e", "appliance_trigger=realtime",
                     "-e", "appliance_interval='1 second'")
    assert run.returncode != 0, run.stdout[-4000:]
    assert ("appliance.toml (rendered for controller): query.interval: the realtime "
            "trigger needs at least 5 seconds") in run.stdout, run.stdout[-4000:]
    assert "changed=0" in run.stdout
