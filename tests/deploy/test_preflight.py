"""The deploy's preflight on the controller alone: no test bed, no root.

The preflight play (`--tags preflight`) against an inventory whose every group is this
machine (nothing is deployed: the roles' plays do not run under that tag). It validates
every role's arguments and loads the appliance.toml the appliance role would install with
the appliance's own ``load_config``: a real-time deploy with the role's defaults must
pass (its interval is the trigger's own default), an interval the real-time trigger
refuses must stop the run with the appliance's one line, naming the field.
"""

from __future__ import annotations

import ipaddress
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml
from cryptography import x509

from appliance.trigger import DEFAULT

ANSIBLE_DIR = Path(__file__).resolve().parents[2] / "ansible"
VENV_BIN = Path(sys.executable).parent
GROUPS = ("spark_master", "spark_workers", "kafka", "appliance", "monitoring")


PASSWORDS = {"admin": "admin-password-for-tests", "appliance": "appliance-pw-for-tests",
             "loadgen": "loadgen-password-for-tests"}


def _write_inventory(path: Path, extra_vars: dict) -> Path:
    host = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
            "cluster_address": "127.0.0.1"}
    path.write_text(yaml.safe_dump({"all": {
        "vars": {"spark_auth_secret": "a-test-secret-of-32-characters..",
                 "monitoring_web_password": "a-web-password-for-tests", **extra_vars},
        "hosts": {"controller": host},
        "children": {group: {"hosts": {"controller": None}} for group in GROUPS}}}))
    return path


@pytest.fixture(scope="module")
def inventory(tmp_path_factory) -> Path:
    """A secured site (the default) whose CA and broker certificate the first preflight
    makes on the controller; later runs find them and change nothing."""
    path = _write_inventory(tmp_path_factory.mktemp("preflight") / "hosts.yml",
                            {"kafka_passwords": PASSWORDS})
    first = _preflight(path)
    assert first.returncode == 0, first.stdout[-4000:] + first.stderr[-2000:]
    return path


def _preflight(inventory: Path, *extra: str) -> subprocess.CompletedProcess:
    """The preflight; the site's TLS goes to the inventory's neighbour ``pki`` (-e: a
    playbook group_vars value outranks the inventory's)."""
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0",
               PATH=f"{VENV_BIN}:{os.environ.get('PATH', '')}")
    # The wheelhouse (packages) and the rules' Spark analysis are not what is tested.
    return subprocess.run(
        [str(VENV_BIN / "ansible-playbook"), "-i", str(inventory), "site.yml",
         "--tags", "preflight", "--skip-tags", "packages,rules_check",
         "-e", f"kafka_tls_dir={inventory.parent / 'pki'}", *extra],
        cwd=ANSIBLE_DIR, env=env, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def made(inventory) -> dict[str, bytes]:
    """The site's TLS files as the first preflight (``inventory``'s) made them."""
    tls_dir = inventory.parent / "pki"
    return {p.name: p.read_bytes() for p in sorted(tls_dir.iterdir())}


@pytest.fixture(scope="module")
def rerun(inventory, made) -> subprocess.CompletedProcess:
    """The preflight again with the role's defaults (the default trigger), after the first
    run made the certificates (``made``): one run for the tests that read it."""
    return _preflight(inventory)


# The default trigger in `make test`; the others (a minute between them, the same tasks with
# another value) in `make faults`, with the other long variants.
@pytest.mark.parametrize("trigger", [
    pytest.param("realtime", marks=pytest.mark.faults_long),
    pytest.param("microbatch", marks=pytest.mark.faults_long),
    DEFAULT.name,
])
def test_every_trigger_with_the_defaults_passes_the_preflight(inventory, rerun, trigger):
    run = rerun if trigger == DEFAULT.name else \
        _preflight(inventory, "-e", f"appliance_trigger={trigger}")
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


def test_the_preflight_makes_the_site_ca_and_a_broker_certificate_once(inventory, made, rerun):
    """Made on the first run (the fixture's), kept by the next (``rerun``): the broker
    certificate is the CA's and names the host's cluster address, the keys are private."""
    tls_dir = inventory.parent / "pki"
    names = sorted(made)
    assert names == ["ca.key", "ca.pem", "controller.key", "controller.pem"], names
    assert all((tls_dir / n).stat().st_mode & 0o077 == 0 for n in ("ca.key", "controller.key"))
    assert rerun.returncode == 0 and "changed=0" in rerun.stdout, rerun.stdout[-4000:]
    assert {n: (tls_dir / n).read_bytes() for n in names} == made
    ca = x509.load_pem_x509_certificate(made["ca.pem"])
    leaf = x509.load_pem_x509_certificate(made["controller.pem"])
    leaf.verify_directly_issued_by(ca)  # raises unless the CA signed it
    alt = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert ipaddress.ip_address("127.0.0.1") in alt.get_values_for_type(x509.IPAddress)


def test_a_secured_site_without_passwords_stops_the_preflight(tmp_path):
    """Secured by default: no kafka_passwords (the vault) is an error naming the users,
    never a broker nobody can log in to, nor one anybody can."""
    path = _write_inventory(tmp_path / "hosts.yml",
                            {"kafka_passwords": {"admin": "x-password-x"}})
    run = _preflight(path)
    assert run.returncode != 0, run.stdout[-4000:]
    assert "kafka_passwords (group_vars/all/vault.yml) needs" in run.stdout, run.stdout[-4000:]
    assert "missing: appliance, loadgen" in run.stdout, run.stdout[-4000:]
    assert "x-password-x" not in run.stdout + run.stderr


def test_cpus_a_host_does_not_have_stop_the_preflight(inventory):
    """kafka_broker_cpus, spark_worker_cpus, appliance_cpus (each unit's CPUAffinity=): a
    CPU index the host lacks, or one that is not a number, stops the run before any host
    changes, naming the variable; so do CPUs to keep to after ready that leave none of the
    appliance's own out (appliance_cpus_after_ready); CPUs the host has pass. The four
    runs only read the inventory and its certificates: they run side by side, not one
    after the other (about 25 s each)."""
    cases = {
        "absent": {"kafka_broker_cpus": [0, 4096]},
        "word": {"appliance_cpus": ["first"]},
        "every": {"appliance_cpus": [1], "appliance_cpus_after_ready": [1]},
        "given": {"kafka_broker_cpus": [0], "spark_worker_cpus": [0, 0],
                  "appliance_cpus": [0, 1], "appliance_cpus_after_ready": [1]},
    }
    with ThreadPoolExecutor(max_workers=len(cases)) as pool:
        futures = {name: pool.submit(_preflight, inventory, "-e", json.dumps(extra))
                   for name, extra in cases.items()}
        runs = {name: future.result() for name, future in futures.items()}
    absent, word, every, given = (runs[name] for name in cases)
    assert absent.returncode != 0, absent.stdout[-4000:]
    assert "kafka_broker: kafka_broker_cpus [0, 4096] names CPUs controller does not have" \
        in absent.stdout, absent.stdout[-4000:]
    assert "changed=0" in absent.stdout
    assert word.returncode != 0, word.stdout[-4000:]
    assert "appliance_cpus" in word.stdout, word.stdout[-4000:]
    assert every.returncode != 0, every.stdout[-4000:]
    assert "appliance_cpus_after_ready [1] must name some but not all of the CPUs the " \
        "appliance may use on controller ([1])" in " ".join(every.stdout.split()), \
        every.stdout[-4000:]
    assert given.returncode == 0, given.stdout[-4000:] + given.stderr[-2000:]
