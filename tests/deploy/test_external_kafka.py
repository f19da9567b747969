"""A site whose Kafka cluster already runs: site.yml deploys Spark, the appliance and
monitoring against it, and installs no broker.

After test_deploy.py, on the same test bed (the hosts stay booted): the fourth host runs
"the existing cluster", set up by its owner's own play (existing_kafka.yml, not site.yml)
with its own CA, its own users (SCRAM-SHA-256) and ACLs for the appliance's user. The
site's inventory is a copy of inventories/external-kafka filled in as an operator would:
the cluster's bootstrap, protocol, mechanism, CA and the appliance's user, the password in
the vault. The site is moved off its own broker the way ansible/README.md says (its
broker stopped, the appliance's checkpoint set aside), then site.yml runs.
"""

from __future__ import annotations

import json
import shutil
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from support.deploy import deploy_bed as bed
from support.secure_helpers import make_tls, new_password, write_private

pytestmark = [pytest.mark.deploy, pytest.mark.timeout(2700)]

EXISTING_INVENTORY = bed.ANSIBLE_DIR / "inventories" / "testbed-existing-kafka" / "hosts.yml"
#: The user the cluster's owner made for the appliance (not the site's default name).
APPLIANCE_USER = "svc-appliance"
TESTER = "ext-tester"
ALERT_TIMEOUT_S = 300


@dataclass(frozen=True)
class ExistingKafka:
    host: bed.Host
    bootstrap: str
    ca: Path
    passwords: dict[str, str]

    def client(self, user: str) -> bed.Kafka:
        security = bed.ClientSecurity.from_properties({
            "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": user, "sasl.password": self.passwords[user],
            "ssl.truststore.type": "PEM", "ssl.truststore.location": str(self.ca)})
        return bed.Kafka(self.bootstrap, security)


@pytest.fixture(scope="module")
def existing_kafka(testbed, deployed, tmp_path_factory) -> ExistingKafka:
    """The cluster, up: its owner's play on the fourth host."""
    spec = yaml.safe_load(EXISTING_INVENTORY.read_text())["all"]["hosts"]
    (name, host_vars), = spec.items()
    host = bed.Host(name, host_vars["ansible_host"], ())
    work = tmp_path_factory.mktemp("existing-kafka")
    tls = make_tls(work / "tls", names=(name, host.address))
    passwords = {"owner-admin": new_password(), APPLIANCE_USER: new_password(),
                 TESTER: new_password()}
    acls = [{"principal": f"User:{APPLIANCE_USER}", "topic": "events", "operations": ["READ"]},
            {"principal": f"User:{APPLIANCE_USER}", "topic": "alerts",
             "operations": ["WRITE", "READ"]},
            {"principal": f"User:{APPLIANCE_USER}", "topic": "events.dlq",
             "operations": ["WRITE"]},
            # The appliance pair's group and control topic (appliance_ha_group).
            {"principal": f"User:{APPLIANCE_USER}", "group": "appliance-pair",
             "operations": ["READ"]},
            {"principal": f"User:{APPLIANCE_USER}", "topic": "appliance-pair.ha",
             "operations": ["CREATE", "READ", "WRITE"]},
            {"principal": f"User:{TESTER}", "topic": "events", "operations": ["WRITE"]},
            {"principal": f"User:{TESTER}", "topic": "alerts", "operations": ["READ"]}]
    owner_vars = work / "owner.json"
    write_private(owner_vars, json.dumps({
        "owner_wheelhouse": str(bed.REPO / "build" / "wheelhouse"), "owner_cert": str(tls.cert),
        "owner_key": str(tls.key), "owner_passwords": passwords, "owner_acls": acls}))
    run = bed.run_playbook("-e", f"@{owner_vars}", label="existing-kafka", timeout=900,
                           inventory=EXISTING_INVENTORY.parent,
                           playbook=str(Path(__file__).with_name("existing_kafka.yml")))
    assert run.rc == 0, f"the existing cluster did not come up, see {run.log}"
    return ExistingKafka(host, f"{host.address}:9093", tls.ca, passwords)


def _operator_inventory(testbed, existing: ExistingKafka, root: Path) -> Path:
    """inventories/external-kafka, copied and filled in with the test bed's hosts."""
    inventory = root / "site"
    shutil.copytree(bed.ANSIBLE_DIR / "inventories" / "external-kafka", inventory)
    (inventory / "group_vars" / "all" / "vault.yml.example").unlink()
    site = yaml.safe_load(bed.INVENTORY.read_text())
    secrets = {k: site["all"]["vars"].pop(k) for k in ("spark_auth_secret",
                                                       "monitoring_web_password",
                                                       "kafka_passwords")}
    for key in [k for k in site["all"]["vars"] if k.startswith("kafka_broker_")]:
        del site["all"]["vars"][key]  # the site's own broker's: no broker here
    del site["all"]["children"]["kafka"]
    for host in site["all"]["hosts"].values():
        host.pop("kafka_broker_cpus", None)
    (inventory / "hosts.yml").write_text(yaml.safe_dump(site))
    settings = yaml.safe_load((inventory / "group_vars" / "all" / "site.yml").read_text())
    settings.update({"appliance_kafka_bootstrap": existing.bootstrap,
                     "kafka_security_protocol": "SASL_SSL",
                     "kafka_sasl_mechanism": "SCRAM-SHA-256",
                     "kafka_tls_ca_cert": str(existing.ca),
                     "kafka_appliance_user": APPLIANCE_USER})
    (inventory / "group_vars" / "all" / "site.yml").write_text(yaml.safe_dump(settings))
    write_private(inventory / "group_vars" / "all" / "vault.yml", yaml.safe_dump({
        "spark_auth_secret": secrets["spark_auth_secret"],
        "monitoring_web_password": secrets["monitoring_web_password"],
        "kafka_passwords": {APPLIANCE_USER: existing.passwords[APPLIANCE_USER]}}))
    return inventory


@pytest.fixture(scope="module")
def external_site(testbed, existing_kafka, tmp_path_factory):
    """The site moved onto the existing cluster: (its inventory, the run, --check --diff)."""
    inventory = _operator_inventory(testbed, existing_kafka, tmp_path_factory.mktemp("op"))
    # As ansible/README.md says for a site moving to another cluster: the old broker off,
    # the checkpoint (offsets of the old cluster's topics) set aside.
    broker = testbed.one("kafka")
    testbed.ssh(broker, "systemctl disable --now appliance-broker")
    # Both instances of the pair, the standby first (the active one then has nobody to
    # hand over to, and stops).
    roles = bed.ha_roles(testbed)
    for appliance in sorted(testbed.group("appliance"), key=lambda h: roles[h.name] or 0):
        testbed.ssh(appliance, "systemctl stop appliance && mv /var/lib/appliance/checkpoints "
                    "/var/lib/appliance/checkpoints.site-broker")
    run = bed.run_playbook(label="external-kafka", inventory=inventory, timeout=1800)
    # The deploy suite's one `--check --diff` pass: on the site's last state, after the
    # first deploy, the rules changes and the rolling upgrade (test_deploy.py).
    check = bed.run_playbook("--check", "--diff", label="check-diff",
                             inventory=inventory, timeout=900)
    return inventory, run, check


def test_site_yml_deploys_against_it_and_installs_no_broker(testbed, external_site):
    _inventory, run, check = external_site
    assert run.rc == 0, f"the site did not deploy against the existing cluster, see {run.log}"
    assert set(run.recap) == set(testbed.hosts), run.recap
    assert "kafka_broker :" not in run.output, "site.yml ran the broker role"
    for host in testbed.hosts.values():
        active = testbed.ssh(host, "systemctl is-active appliance-broker", check=False)
        assert active.stdout.strip() != "active", f"a broker runs on {host.name}"


def test_check_diff_on_the_converged_site_changes_nothing_and_shows_no_secret(
        testbed, external_site, existing_kafka):
    inventory, _run, check = external_site
    assert check.rc == 0, f"--check --diff failed (rc={check.rc}), see {check.log}"
    assert set(check.recap) == set(testbed.hosts), check.recap
    assert check.changed() == {h: 0 for h in testbed.hosts}, \
        f"--check --diff reports changes on a converged site, see {check.log}"
    # Nothing that renders a secret shows it in a diff.
    vault = yaml.safe_load((inventory / "group_vars" / "all" / "vault.yml").read_text())
    assert vault["spark_auth_secret"] not in check.output
    assert vault["monitoring_web_password"] not in check.output
    assert existing_kafka.passwords[APPLIANCE_USER] not in check.output


def test_its_ca_is_on_the_appliance_host_and_every_worker(testbed, external_site,
                                                          existing_kafka):
    ca = existing_kafka.ca.read_text()
    for host in {testbed.one("appliance"), *testbed.group("spark_workers")}:
        assert testbed.ssh(host, "cat /etc/appliance-kafka/ca.pem").stdout == ca, host.name
    appliance = testbed.one("appliance")
    text = testbed.ssh(appliance, "cat /etc/appliance/appliance.toml").stdout
    assert tomllib.loads(text)["kafka"] == {
        "bootstrap_servers": existing_kafka.bootstrap, "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": APPLIANCE_USER,
        "ssl.truststore.type": "PEM", "ssl.truststore.location": "/etc/appliance-kafka/ca.pem"}
    password = existing_kafka.passwords[APPLIANCE_USER]
    assert password not in text
    assert password in testbed.ssh(appliance, "cat /etc/appliance/appliance.env").stdout
    # Prometheus scrapes no broker: the cluster is its owner's to watch.
    monitoring = testbed.one("monitoring")
    targets = bed.prometheus_targets(f"http://{monitoring.address}:9090")
    assert "broker" not in targets and "appliance" in targets, sorted(targets)


def test_exact_alerts_come_back_through_the_existing_cluster(existing_kafka, external_site):
    client = existing_kafka.client(TESTER)
    try:
        prefix = bed.unique("external")
        hits = bed.make_events(f"{prefix}-hit", 30, value=99.0)
        misses = bed.make_events(f"{prefix}-miss", 30, value=10.0)
        client.produce(hits + misses)
        expected = {e["event_id"] for e in hits}
        missing = client.wait_alerts(expected, ALERT_TIMEOUT_S)
        assert not missing, f"{len(missing)} alerts missing, e.g. {sorted(missing)[:5]}"
        time.sleep(3)  # a miss would have come with the hits
        assert {a for a in client.poll_alerts() if a.startswith(prefix)} == expected
    finally:
        client.close()
