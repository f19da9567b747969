"""Fixtures of the deploy suite: a test bed of real hosts, the built wheel, a deployed site.

The test bed (scripts/testbed) is booted once per session and torn down at its end;
``deployed`` runs the playbook twice (converge, then idempotence), both publishing the
dashboards to a Grafana stand-in on the controller, and hands the results to every test.
The scenarios share this one bed in a fixed order (test_deploy.py, then
test_external_kafka.py): first deploy, idempotence, rules-only changes, the rolling upgrade
under load, the move to an existing Kafka, and then the suite's one ``--check --diff``.
Set-up, the runs and tear-down are timed into build/testbed/timings.json. A failed test's
hosts' journals are copied to build/testbed/journals/<test>/ before anything else runs:
the bed, and its journals with it, is gone at the session's end.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.parse

import pytest

from support.deploy import deploy_bed as bed
from support.grafana_standin import GrafanaStandIn  # no Grafana can be installed here

TIMINGS = bed.REPO / "build" / "testbed" / "timings.json"
JOURNALS = bed.REPO / "build" / "testbed" / "journals"
JOURNAL_LINES = 300_000  # per host: the whole of a suite's run, with room
GRAFANA_TOKEN = "glsa_deploy_test_token_not_a_secret"


def _record(key: str, seconds: float) -> None:
    TIMINGS.parent.mkdir(parents=True, exist_ok=True)
    data = json.loads(TIMINGS.read_text()) if TIMINGS.exists() else {}
    data[key] = round(seconds, 1)
    TIMINGS.write_text(json.dumps(data, indent=2) + "\n")


def _needs_root() -> None:
    missing = [t for t in ("systemd-nspawn", "mmdebstrap", "ssh") if shutil.which(t) is None]
    if os.geteuid() != 0 or missing:
        # The deploy runs on real hosts the test bed boots: namespaces, mounts and cgroups
        # need root. CI runs `make test` as root, where this never skips.
        pytest.skip(f"the deploy test bed needs root and {', '.join(missing) or 'its tools'}"
                    " (run `make setup` then `make test` as root)")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Remember whether a test's own call failed (``keep_journals`` reads it)."""
    report = (yield).get_result()
    if report.when == "call":
        item.stash[CALL_FAILED] = report.failed


CALL_FAILED = pytest.StashKey[bool]()


@pytest.fixture(autouse=True)
def keep_journals(request):
    """After a failed test on the bed: every host's journal, for the post-mortem."""
    yield
    if not request.node.stash.get(CALL_FAILED, False) or "testbed" not in request.fixturenames:
        return
    testbed = request.getfixturevalue("testbed")
    out = JOURNALS / request.node.name
    out.mkdir(parents=True, exist_ok=True)
    for host in testbed.hosts.values():
        got = testbed.ssh(host, f"journalctl --no-pager -o short-precise -n {JOURNAL_LINES}",
                          timeout=300, check=False)
        (out / f"{host.name}.journal").write_text(got.stdout + got.stderr)
    print(f"journals of {request.node.name}'s hosts: {out}")


@pytest.fixture(scope="session")
def wheel():
    """The appliance wheel (`make dist`, jars inside) the deploy installs on the hosts."""
    _needs_root()
    subprocess.run(["make", "-s", "dist"], cwd=bed.REPO, check=True, timeout=900)
    wheels = sorted((bed.REPO / "dist").glob("appliance-*.whl"))
    assert len(wheels) == 1, f"make dist left {wheels}"
    return wheels[0]


@pytest.fixture(scope="session")
def testbed(wheel):
    """A freshly booted test bed; torn down (everything it made) after the session."""
    subprocess.run([*bed.TESTBED, "down"], check=True, timeout=300)  # leftovers of a crash
    started = time.monotonic()
    subprocess.run([*bed.TESTBED, "up"], check=True, timeout=1200)
    _record("testbed_up_s", time.monotonic() - started)
    yield bed.Inventory()
    started = time.monotonic()
    subprocess.run([*bed.TESTBED, "down"], check=True, timeout=300)
    _record("testbed_down_s", time.monotonic() - started)


@pytest.fixture(scope="session")
def bad_variable_run(testbed):
    """A run with a negative worker memory, on the fresh hosts, before any deploy."""
    return bed.run_playbook("-e", "spark_worker_memory=-1g", label="bad-variable",
                            timeout=900)


@pytest.fixture(scope="session")
def grafana():
    """A Grafana stand-in on the controller, where `appliance dashboards publish` runs."""
    with GrafanaStandIn() as stand_in:
        yield stand_in


@pytest.fixture(scope="session")
def webhook(testbed):
    """The webhook the deployed Alertmanager notifies (monitoring_alert_webhook_url in the
    test bed's inventory: the controller's side of the bridge)."""
    url = urllib.parse.urlparse(testbed.vars["monitoring_alert_webhook_url"])
    receiver = bed.AlertWebhook(url.hostname, url.port)
    yield receiver
    receiver.close()


def publishing(grafana) -> tuple[list[str], dict[str, str]]:
    """Playbook arguments and environment of a run that publishes to the stand-in."""
    return ["-e", f"grafana_url={grafana.url}"], {"GRAFANA_TOKEN": GRAFANA_TOKEN}


@pytest.fixture(scope="session")
def deployed(testbed, bad_variable_run, grafana, webhook):
    """The site deployed, publishing to Grafana: (first run, second run) results."""
    args, env = publishing(grafana)
    first = bed.run_playbook(*args, label="first", env=env)
    _record("first_run_s", first.seconds)
    assert first.rc == 0, f"first run failed (rc={first.rc}), see {first.log}"
    second = bed.run_playbook(*args, label="second", env=env)
    _record("second_run_s", second.seconds)
    return first, second


@pytest.fixture(scope="session")
def kafka(testbed, deployed):
    broker = testbed.one("kafka")
    # As the loadgen user, with the settings the play wrote on the controller.
    client = bed.Kafka(f"{broker.address}:9092", bed.site_client_security())
    yield client
    client.close()
