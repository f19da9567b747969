"""`ansible-playbook site.yml` on real hosts (the test bed): the issue's acceptance.

The tests run in file order on one deployed site: validation failures first (on fresh
hosts), then the deploy and its idempotence (publishing to a Grafana stand-in), the
appliance's active/standby pair (tb-master and tb-worker2), then traffic, a rogue driver,
a reboot of the worker that runs the pair's active instance mid-stream, the network of the
master's host cut while its instance serves, a load from the
controller after which every dashboard panel's query must return data from the deployed
Prometheus, a worker-only change rolled out one worker at a time, then the rules updates
(they change the deployed rules), the pair's standby stopped until Alertmanager's webhook
says so, a rules file broken by hand on the host, and last an upgrade rolled under load
(the pair's standby first, a handover, then the other; its settings stay:
test_external_kafka.py, next, redeploys). The suite's one `--check --diff` pass previews
the site's last state, there.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import math
import re
import shlex
import shutil
import socket
import subprocess
import sys
import threading
import time
import tomllib
import urllib.request
import uuid
import zipfile
from dataclasses import dataclass
from pathlib import Path

import matplotlib.image
import pytest
import yaml
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import KafkaConfigurationError, KafkaError

from appliance.cli import main as appliance_main
from appliance.cpu_list import parse_cpu_list
from appliance.rules.rules_file import rules_version
from appliance.trigger import MODES
from appliance.tuning import tuning_for
from dashboards import catalog
from loadgen.config import LoadConfig
from loadgen.run import run_load

from support.deploy import deploy_bed as bed
from support.secure_helpers import write_private

# The end-to-end deploy builds the test bed and runs ansible-playbook several times
# (measured: ~16 min in all, the first run ~8 min, building the wheelhouse on a fresh
# clone adds more): `make test` runs it after the rest, `make test-deploy` alone. The
# session fixtures (test bed, two playbook runs) are set up inside the first tests, so
# their time counts against those tests' timeout.
pytestmark = [pytest.mark.deploy, pytest.mark.timeout(2700)]

TRIGGER = "continuous"
ALERT_TIMEOUT_S = 300      # a restarted appliance: JVM, executors, first epoch
REJOIN_TIMEOUT_S = 180
EXAMPLE_RULES = bed.REPO / "examples" / "rules.yml"
# loadgen from the controller: a rate the one 2-core machine sustains with the three hosts
# (master, two workers, broker, appliance, Prometheus) on it; the figure goes to the notes.
LATENCY_RATE = 1000
LATENCY_SECONDS = 20
LATENCY_REPORT = bed.REPO / "build" / "testbed" / "deployed_latency.json"
DASHBOARD_PNGS = bed.REPO / "build" / "testbed" / "dashboards"
#: Prometheus' scrape interval on the deployed site (monitoring_scrape_interval).
SCRAPE_S = 5.0
#: The jobs dashboards/ and its rules use: the deployed Prometheus scrapes every one.
JOBS = {job["job_name"] for job in yaml.safe_load(
    (catalog.PROMETHEUS_DIR / "prometheus.yml").read_text())["scrape_configs"]}


def _host_file(testbed, host, path: str) -> str:
    return testbed.ssh(host, f"cat {shlex.quote(path)}").stdout


def _invocation(testbed, host) -> str:
    return testbed.ssh(host, "systemctl show -P InvocationID appliance").stdout.strip()


def _appliance_journal(testbed, host) -> str:
    """The running invocation of the appliance unit's log lines, as one text."""
    return testbed.ssh(host, "journalctl -o cat --no-pager "
                       f"_SYSTEMD_INVOCATION_ID={_invocation(testbed, host)}",
                       check=False).stdout


def _wait_up(testbed, host, timeout: float = 300) -> None:
    """Until the running invocation of the appliance logged ``appliance.ready`` (it
    serves) or ``ha.standby`` (it waits, warm, as its pair's standby)."""
    def up() -> bool:
        events = {e.get("event") for e in _appliance_events(testbed, host)}
        return bool(events & {"appliance.ready", "ha.standby"})

    assert bed.wait_for(up, timeout, 2), f"the appliance on {host.name} was not up in {timeout} s"


def _pair(testbed, timeout: float = 300):
    """(active, standby) hosts of the appliance pair, once it has one of each."""
    settled = bed.wait_for(lambda: bed.pair_settled(testbed), timeout, 2)
    assert settled, f"no active and standby within {timeout} s: {bed.ha_roles(testbed)}"
    return settled


def _hand_over(testbed, active) -> str:
    """`appliance ha handover` on the active host, as the play runs it: its output."""
    out = testbed.ssh(active, "systemd-run --quiet --wait --pipe --collect "
                      "--property=User=appliance --property=Group=appliance "
                      "--property=EnvironmentFile=/etc/appliance/appliance.env "
                      "/opt/appliance/venv/bin/appliance ha handover "
                      "--config /etc/appliance/appliance.toml", timeout=240)
    return out.stdout.strip()


def _serving_on(testbed, host, timeout: float = 120) -> None:
    """The pair handed over to ``host``'s instance (unless it serves already), until it
    serves."""
    active, _standby = _pair(testbed, timeout=420)
    if active.name != host.name:
        said = _hand_over(testbed, active)
        assert host.name in said, said

    def serves() -> bool:
        settled = bed.pair_settled(testbed)
        return settled is not None and settled[0].name == host.name

    assert bed.wait_for(serves, timeout, 1), bed.ha_roles(testbed)


def _process(testbed, host) -> tuple[str, int]:
    """The appliance unit's invocation and main process: both the same = no restart."""
    return _invocation(testbed, host), bed.main_pid(testbed, host, "appliance")


def _rules_sha(testbed, host) -> str:
    return testbed.ssh(host, "sha256sum /etc/appliance/rules.yml").stdout.split()[0]


def _example_rules_and(tmp_path, rule: dict) -> Path:
    """examples/rules.yml with ``rule`` added, written to ``tmp_path``: a rules change."""
    rules = yaml.safe_load(EXAMPLE_RULES.read_text())
    rules["rules"].append(rule)
    path = tmp_path / "rules.yml"
    path.write_text(yaml.safe_dump(rules))
    return path


# -- before anything is deployed --------------------------------------------------------

def test_bad_inventory_variable_fails_argument_validation(testbed, bad_variable_run):
    run = bad_variable_run
    assert run.rc != 0, f"a negative worker memory was accepted, see {run.log}"
    assert "Validation of arguments failed" in run.output, run.log
    assert "spark_worker_memory" in run.output, run.log
    assert all(r["changed"] == 0 for r in run.recap.values()), run.recap
    for host in testbed.hosts.values():  # nothing was installed anywhere
        probe = testbed.ssh(host, "test -e /opt/appliance || test -e /etc/spark", check=False)
        assert probe.returncode != 0, f"{host.name} was changed by a run that failed validation"


# -- the deploy -------------------------------------------------------------------------

def test_first_run_converges_and_second_changes_nothing(testbed, deployed, grafana):
    first, second = deployed
    assert set(first.recap) == set(testbed.hosts), first.recap
    assert all(r["failed"] == 0 and r["unreachable"] == 0 for r in first.recap.values())
    assert second.rc == 0, f"second run failed, see {second.log}"
    assert set(second.recap) == set(testbed.hosts), second.recap
    assert second.changed() == {h: 0 for h in testbed.hosts}, \
        f"second run changed something, see {second.log}"
    # Both runs published to Grafana; the second found nothing to change (changed=0
    # above), and the datasource points at the deployed Prometheus.
    monitoring = testbed.one("monitoring")
    assert set(grafana.state.dashboards) == {b.uid for b in catalog.load()}
    assert set(grafana.state.versions.values()) == {1}, grafana.state.versions
    source = grafana.state.datasources[catalog.DATASOURCE_UID]
    assert source["url"] == f"http://{monitoring.address}:9090"


def test_the_pair_has_one_active_one_standby_and_no_alert_says_otherwise(testbed, deployed):
    """Two appliance hosts: each renders [ha] alike but for its instance name, each is its
    own Spark application with its share of the workers' cores, one serves
    (appliance_ha_role 1) and the other waits (0), as the deployed Prometheus sees them
    too; AppliancePairNoStandby stays quiet."""
    active, standby = _pair(testbed)
    assert {active.name, standby.name} == {h.name for h in testbed.group("appliance")}
    for host in (active, standby):
        toml = tomllib.loads(_host_file(testbed, host, "/etc/appliance/appliance.toml"))
        assert toml["ha"] == {"group": "appliance-pair", "instance": host.name,
                              "session_timeout": "2 seconds"}, toml.get("ha")
        assert (toml["spark"]["spark.cores.max"], toml["spark"]["spark.executor.cores"]) \
            == ("4", "2")
    master = testbed.one("spark_master")
    apps = [a for a in bed.master_status(master.address)["activeapps"]
            if a["name"] == "appliance"]
    assert len(apps) == 2 and all(2 <= a["cores"] <= 4 for a in apps), apps
    prometheus = f"http://{testbed.one('monitoring').address}:9090"

    def latest(expr: str) -> list[tuple[str, float]]:
        now = time.time()
        return sorted((s["metric"].get("instance", ""), float(s["values"][-1][1]))
                      for s in bed.prometheus_query_range(prometheus, expr, now - 1, now,
                                                          SCRAPE_S))

    roles = bed.wait_for(lambda: sorted(v for _i, v in latest("appliance_ha_role"))
                         == [0.0, 1.0], 60, SCRAPE_S)
    assert roles, latest("appliance_ha_role")
    time.sleep(3 * SCRAPE_S)  # evaluated since: a rule that fired would show
    assert latest('ALERTS{alertname="AppliancePairNoStandby"}') == []


def _cpu_list(text: str) -> set[int]:
    """A CPU list as the kernel and systemd print it ("0-1,3", "0 1") as a set."""
    return set(parse_cpu_list(text.strip()))


def _appliance_events(testbed, host) -> list[dict]:
    """The running invocation's JSON log lines."""
    events = []
    for line in _appliance_journal(testbed, host).splitlines():
        if line.startswith("{"):
            with contextlib.suppress(ValueError):
                events.append(json.loads(line))
    return events


def _wait_cpus_released(testbed, host, timeout: float = 120) -> list[dict]:
    """Until the running appliance's after-ready CPU window is over; its log lines."""
    events: list[dict] = []

    def released() -> bool:
        events[:] = _appliance_events(testbed, host)
        return any(e.get("event") == "cpus.released" for e in events)

    assert bed.wait_for(released, timeout, 2), \
        f"no cpus.released in {timeout} s: {[e.get('event') for e in events][-20:]}"
    return events


def _cpus(testbed, host, pid: int) -> set[int]:
    """The CPUs process ``pid`` on ``host`` may run on (its ``Cpus_allowed_list``)."""
    status = _host_file(testbed, host, f"/proc/{pid}/status")
    return _cpu_list(next(line.split(":", 1)[1] for line in status.splitlines()
                          if line.startswith("Cpus_allowed_list:")))


def test_master_lists_both_workers_alive_with_cores(testbed, deployed):
    """Each worker offers spark_worker_cores_per_cpu (the test bed's 4: the pair's standby's
    executors mostly wait) cores per CPU its process may use (spark_worker_cpus, or all
    the host's)."""
    master = testbed.one("spark_master")
    workers = testbed.group("spark_workers")
    alive = bed.alive_workers(master.address)
    assert set(alive) == {w.address for w in workers}, alive
    for worker in workers:
        usable = _cpus(testbed, worker, bed.main_pid(testbed, worker, "spark-worker"))
        per_cpu = int(testbed.vars.get("spark_worker_cores_per_cpu", 1))
        assert alive[worker.address] == per_cpu * len(usable), (worker.name, usable, alive)


def test_units_run_on_the_cpus_the_inventory_gives_them(testbed, deployed):
    """kafka_broker_cpus, spark_worker_cpus and appliance_cpus (the test bed's host
    variables) become each unit's CPUAffinity=, which the process and its children get;
    a unit without them may use every CPU."""
    active, _standby = _pair(testbed)
    _wait_cpus_released(testbed, active)  # see the next test
    pinned = [("appliance-broker", testbed.hosts["tb-worker1"], {1}),
              ("spark-worker", testbed.hosts["tb-worker2"], {0, 1}),
              *(("appliance", host, {0, 1}) for host in testbed.group("appliance"))]
    for unit, host, cpus in pinned:
        shown = testbed.ssh(host, f"systemctl show -P CPUAffinity {unit}").stdout
        assert _cpu_list(shown) == cpus, (unit, host.name, shown)
        pid = bed.main_pid(testbed, host, unit)
        assert _cpus(testbed, host, pid) == cpus, (unit, host.name)
        children = testbed.ssh(host, f"pgrep -P {pid}", check=False).stdout.split()
        for child in children:  # the executors, the driver JVM
            assert _cpus(testbed, host, int(child)) == cpus, (unit, host.name, child)
    unpinned = testbed.hosts["tb-worker1"]  # the broker's host: its worker is not pinned
    assert testbed.ssh(unpinned, "systemctl show -P CPUAffinity spark-worker").stdout.strip() \
        == ""
    nproc = int(testbed.ssh(unpinned, "nproc --all").stdout)
    assert _cpus(testbed, unpinned, bed.main_pid(testbed, unpinned, "spark-worker")) \
        == set(range(nproc))


def test_the_appliance_keeps_to_its_after_ready_cpus_then_gets_them_back(testbed, deployed):
    """appliance_cpus_after_ready (the test bed's [0] for 5 s, `[cpus]` in appliance.toml):
    from ready the appliance's processes keep to CPU 0, then get both of the unit's back
    (the pair's active instance: a standby is not ready until it serves)."""
    host, _standby = _pair(testbed)
    events = _wait_cpus_released(testbed, host)
    names = [e.get("event") for e in events]
    kept = next(e for e in events if e.get("event") == "cpus.kept")
    released = next(e for e in events if e.get("event") == "cpus.released")
    assert names.index("cpus.kept") < names.index("appliance.ready") \
        < names.index("cpus.released"), names
    assert (kept["cpus"], kept["then"], kept["seconds"]) == ("0", "0-1", 5.0), kept
    assert kept["threads"] > 20 and released["cpus"] == "0-1", (kept, released)
    pid = bed.main_pid(testbed, host, "appliance")
    jvm = testbed.ssh(host, f"pgrep -P {pid} java").stdout.split()
    assert len(jvm) == 1 and _cpus(testbed, host, int(jvm[0])) == {0, 1}
    toml = tomllib.loads(_host_file(testbed, host, "/etc/appliance/appliance.toml"))
    assert toml["cpus"] == {"after_ready": "0", "after_ready_for": "5 seconds"}


def test_rendered_files_carry_the_tuning(testbed, deployed):
    """spark-defaults.conf, spark-env.sh and appliance.toml hold appliance.tuning's values
    (nothing written by hand: compared with the module itself)."""
    tuning = tuning_for(MODES[TRIGGER])
    appliance = testbed.one("appliance")
    defaults = {}
    for line in _host_file(testbed, appliance, "/etc/spark/spark-defaults.conf").splitlines():
        if line.strip() and not line.startswith("#"):
            key, _, value = line.strip().partition(" ")
            defaults[key] = value.strip()
    for key, value in tuning.spark_conf.items():
        if key.endswith("extraJavaOptions"):
            assert defaults[key].startswith(value + " -Xlog:gc*:file="), (key, defaults[key])
            assert "filecount=" in defaults[key] and "filesize=" in defaults[key]
        else:
            assert defaults[key] == value, key
    assert defaults["spark.authenticate"] == "true"
    # The Kafka credentials travel to the executors inside tasks: RPC encrypted.
    assert defaults["spark.network.crypto.enabled"] == "true"

    env = _host_file(testbed, testbed.group("spark_workers")[0], "/etc/spark/spark-env.sh")
    daemon_opts = next(line for line in env.splitlines()
                       if line.startswith("SPARK_DAEMON_JAVA_OPTS="))
    assert " ".join(tuning.jvm_options) in daemon_opts
    assert "-Xlog:gc*:file=/var/log/spark/gc-" in daemon_opts

    text = _host_file(testbed, appliance, "/etc/appliance/appliance.toml")
    toml = tomllib.loads(text)
    assert toml["source"] == tuning.source_options
    assert toml["sink"] == tuning.sink_options
    # The driver's UI serves Spark's driver and executor metrics: on, without kill links.
    driver_ui = {"spark.ui.enabled": "true", "spark.ui.port": "4040",
                 "spark.ui.killEnabled": "false"}
    for key, value in tuning.spark_conf.items():
        assert toml["spark"][key].startswith(driver_ui.get(key, value)), key
    assert {k: toml["spark"][k] for k in driver_ui} == driver_ui
    assert toml["query"]["trigger"] == TRIGGER
    assert toml["query"]["interval"] == "1 second"  # the trigger's own default
    assert toml["query"]["executor_loss_restarts"] == 3  # the role's default
    assert "DESIGN.md" not in text  # no file the host does not have
    # The secured broker as the appliance user; the password only in appliance.env.
    assert {k: v for k, v in toml["kafka"].items() if k != "bootstrap_servers"} == {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "appliance", "ssl.truststore.type": "PEM",
        "ssl.truststore.location": "/etc/appliance-kafka/ca.pem"}


def test_secret_stays_out_of_argv_and_logs(testbed, deployed):
    """The Spark secret and every Kafka password: in no command line, log, rendered
    appliance.toml, unit or play output; the files that hold them are 0600."""
    secrets = {"the Spark secret": testbed.vars["spark_auth_secret"],
               "the monitoring login": testbed.vars["monitoring_web_password"],
               **{f"{user}'s Kafka password": password
                  for user, password in testbed.vars["kafka_passwords"].items()}}
    for host in testbed.hosts.values():
        argv = testbed.ssh(host, "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '").stdout
        logs = testbed.ssh(host, "journalctl --no-pager -o cat; cat /var/log/spark/* 2>/dev/null",
                           check=False).stdout
        files = testbed.ssh(host, "cat /etc/appliance/appliance.toml /etc/systemd/system/*.service"
                            " /etc/appliance-broker/users.toml 2>/dev/null", check=False).stdout
        for what, secret in secrets.items():
            assert secret not in argv, f"{what} is in a command line on {host.name}"
            assert secret not in logs, f"{what} is in a log on {host.name}"
            assert secret not in files, f"{what} is in a rendered file on {host.name}"
    for run in deployed:
        for what, secret in secrets.items():
            assert secret not in run.output, f"{what} is in the play's output"
    appliance, broker = testbed.one("appliance"), testbed.one("kafka")
    modes = {(appliance, "/etc/appliance/appliance.env"): "600 root root",
             (broker, "/etc/appliance-broker/users.toml"): "600 appliance-broker appliance-broker",
             (broker, "/etc/appliance-broker/broker.key"): "600 appliance-broker appliance-broker"}
    for (host, path), mode in modes.items():
        assert testbed.ssh(host, f"stat -c '%a %U %G' {path}").stdout.strip() == mode, path
    env = _host_file(testbed, appliance, "/etc/appliance/appliance.env")
    assert testbed.vars["kafka_passwords"]["appliance"] in env  # where it does belong
    client = (bed.CLIENT_DIR / "loadgen.env").stat().st_mode & 0o777
    assert client == 0o600, oct(client)


def test_services_bind_to_the_cluster_address(testbed, deployed):
    for host in testbed.hosts.values():
        listeners = testbed.ssh(host, "ss -Hltnp").stdout.splitlines()
        services = [line for line in listeners if "sshd" not in line]
        assert services, f"no services on {host.name}?"
        for line in services:
            local = line.split()[3]
            # Java's dual-stack sockets show IPv4 addresses as IPv4-mapped IPv6.
            assert local.startswith((host.address + ":", "127.0.0.1:",
                                     "[::ffff:" + host.address + "]:",
                                     "[::ffff:127.0.0.1]:", "[::1]:")), (host.name, line)


# -- no control surface without a login ---------------------------------------------------

def test_spark_uis_answer_only_the_sites_token_and_kill_nothing(testbed, deployed):
    """Master, worker and driver UIs (with their metrics): Spark's JWSFilter turns away a
    request without the site's token, or with another; the master has no kill links, so a
    kill request, even with the token, leaves the appliance running."""
    master, appliance = testbed.one("spark_master"), testbed.one("appliance")
    worker = testbed.group("spark_workers")[0]
    urls = [f"http://{master.address}:8080/json/",
            f"http://{worker.address}:8081/metrics/prometheus/",
            f"http://{appliance.address}:4040/metrics/prometheus/"]
    forged = {"Authorization": "Bearer eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.e30.forged"}
    for url in urls:
        assert bed.http(url)[0] == 403, url
        assert bed.http(url, forged)[0] == 403, url
        assert bed.http(url, bed.spark_ui_headers())[0] == 200, url
    apps = [a for a in bed.master_status(master.address)["activeapps"]
            if a["name"] == "appliance"]
    assert len(apps) == 2, apps  # the pair: each instance is its own application
    app = apps[0]
    kill = bed.http(f"http://{master.address}:8080/app/kill/?id={app['id']}&terminate=true",
                    bed.spark_ui_headers(), data=b"{}")
    time.sleep(3)
    assert app["id"] in {a["id"] for a in bed.master_status(master.address)["activeapps"]}, \
        f"a kill request ({kill[0]}) ended the appliance's application"


def test_prometheus_and_alertmanager_answer_only_their_login(testbed, deployed):
    """Basic auth from the web config: no login or a wrong one is refused (nobody may read
    the alerts or add a silence), the vaulted one is let in; the host keeps only a bcrypt
    hash of it."""
    monitoring = testbed.one("monitoring")
    wrong = {"Authorization": "Basic " + base64.b64encode(b"admin:wrong-password").decode()}
    for url in (f"http://{monitoring.address}:9090/api/v1/status/buildinfo",
                f"http://{monitoring.address}:9093/api/v2/status"):
        assert bed.http(url)[0] == 401, url
        assert bed.http(url, wrong)[0] == 401, url
        assert bed.http(url, bed.web_headers())[0] == 200, url
    silence = json.dumps({"matchers": [{"name": "alertname", "value": ".*", "isRegex": True}],
                          "startsAt": "2030-01-01T00:00:00Z", "endsAt": "2030-01-02T00:00:00Z",
                          "createdBy": "intruder", "comment": "x"}).encode()
    assert bed.http(f"http://{monitoring.address}:9093/api/v2/silences", data=silence)[0] == 401
    web = _host_file(testbed, monitoring, "/etc/prometheus/web.yml")
    assert "$2b$" in web and testbed.vars["monitoring_web_password"] not in web
    assert testbed.ssh(monitoring, "stat -c '%a %U %G' /etc/prometheus/web.yml").stdout.strip() \
        == "640 root prometheus"


def test_the_broker_runs_under_its_own_account_with_a_retention(testbed, deployed):
    """appliance-broker, not the appliance's account: the Spark driver's user can neither
    read the broker's key nor edit its ACLs. Its retention is set by time (7 days) and by
    bytes (sized to the disk), and it may hold many connections."""
    broker = testbed.one("kafka")
    pid = bed.main_pid(testbed, broker, "appliance-broker")
    assert testbed.ssh(broker, f"ps -o user= -p {pid}").stdout.strip() == "appliance-broker"
    for attempt in ("cat /etc/appliance-broker/broker.key",
                    "cat /etc/appliance-broker/users.toml",
                    "touch /var/lib/appliance-broker/acls.json"):
        probe = testbed.ssh(broker, f"runuser -u appliance -- {attempt}", check=False)
        assert probe.returncode != 0, f"the appliance's account could: {attempt}"
    argv = testbed.ssh(broker, f"tr '\\0' ' ' < /proc/{pid}/cmdline").stdout.split()
    assert argv[argv.index("--retention-ms") + 1] == str(168 * 3600 * 1000)
    assert int(argv[argv.index("--retention-bytes") + 1]) > 1 << 20
    assert testbed.ssh(broker, "systemctl show -P LimitNOFILE appliance-broker").stdout.strip() \
        == "65536"


# -- alerting: routes, inhibition, the Watchdog -------------------------------------------

def _post_alerts(monitoring, alerts: list[dict]) -> None:
    status, body = bed.http(f"http://{monitoring.address}:9093/api/v2/alerts",
                            bed.web_headers(), data=json.dumps(alerts).encode())
    assert status == 200, body[:500]


def test_every_alert_reaches_the_webhook_by_its_severity_route(testbed, deployed, webhook):
    """Each alert of the rules, as Prometheus would send it, reaches the webhook through
    the route of its severity (the notification names the receiver); the Watchdog, which
    the deployed Prometheus really sends, through its own."""
    monitoring = testbed.one("monitoring")
    rules = yaml.safe_load((catalog.PROMETHEUS_DIR / "rules.yml").read_text())
    severities = {r["alert"]: r["labels"]["severity"] for g in rules["groups"]
                  for r in g["rules"] if "alert" in r}
    expected = {name: ("watchdog" if name == "Watchdog" else severity)
                for name, severity in severities.items()}
    tag = bed.unique("routed")
    since = time.time()
    injected = [{"labels": {"alertname": name, "severity": severity,
                            "instance": f"{tag}-{name}", "injected": tag},
                 "annotations": {"summary": "sent by the deploy test"}}
                for name, severity in severities.items() if name != "BrokerDown"]
    _post_alerts(monitoring, injected)
    try:
        def arrived() -> dict[str, str]:
            return {a["labels"]["alertname"]: a["_receiver"]
                    for name in severities
                    for a in webhook.firing(name, since, injected=tag)}
        got = bed.wait_for(lambda: len(arrived()) == len(injected) and arrived(), 90, 2)
        assert got, (f"arrived: {arrived()}; expected "
                     f"{sorted(a['labels']['alertname'] for a in injected)}")
        assert got == {name: expected[name] for name in got}, got
        real = [a for a in webhook.firing("Watchdog", 0) if "injected" not in a["labels"]]
        assert real and {a["_receiver"] for a in real} == {"watchdog"}, real[:2]
    finally:
        _post_alerts(monitoring, [{**a, "endsAt": "2000-01-01T00:00:00Z"} for a in injected])


def test_broker_down_holds_back_query_down_and_events_waiting(testbed, deployed, webhook):
    """Inhibition: while BrokerDown fires, the query-down and events-waiting alerts it
    explains are not sent; BrokerDown is."""
    monitoring = testbed.one("monitoring")
    tag = bed.unique("inhibit")
    since = time.time()
    severity = {"BrokerDown": "critical", "ApplianceQueryDown": "critical",
                "ApplianceEventsWaiting": "warning"}
    alerts = [{"labels": {"alertname": name, "severity": level,
                          "instance": f"{tag}-{name}", "injected": tag},
               "annotations": {"summary": "sent by the deploy test"}}
              for name, level in severity.items()]
    _post_alerts(monitoring, alerts)
    try:
        assert bed.wait_for(lambda: webhook.firing("BrokerDown", since, injected=tag), 60, 1)
        time.sleep(15)  # past group_wait (10 s): the others would have been sent by now
        for name in ("ApplianceQueryDown", "ApplianceEventsWaiting"):
            assert not webhook.firing(name, since, injected=tag), f"{name} was not held back"
    finally:
        _post_alerts(monitoring, [{**a, "endsAt": "2000-01-01T00:00:00Z"} for a in alerts])


# -- traffic ----------------------------------------------------------------------------

def test_events_come_back_as_exact_alerts(testbed, kafka):
    prefix = bed.unique("e2e")
    hits = bed.make_events(f"{prefix}-hit", 40, metric="cpu.util", value=99.0)
    misses = bed.make_events(f"{prefix}-miss", 40, metric="cpu.util", value=10.0)
    kafka.produce(hits + misses)
    expected = {e["event_id"] for e in hits}
    missing = kafka.wait_alerts(expected, ALERT_TIMEOUT_S)
    assert not missing, f"{len(missing)} alerts missing, e.g. {sorted(missing)[:5]}"
    time.sleep(3)  # a miss would have arrived with the hits
    got = {a for a in kafka.poll_alerts() if a.startswith(prefix)}
    assert got == expected
    alert = kafka.alerts[hits[0]["event_id"]]
    assert alert["severity"] == "critical" and alert["rules"][0]["id"] == "cpu-critical"


def _broker_metric(testbed, name: str, **labels: str) -> float:
    """Sum of the broker's ``name`` samples with these labels (its /metrics, job broker)."""
    broker = testbed.one("kafka")
    with urllib.request.urlopen(f"http://{broker.address}:9465/metrics", timeout=10) as resp:
        text = resp.read().decode()
    want = [f'{k}="{v}"' for k, v in labels.items()]
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith((name + "{", name + " ")) and all(w in line for w in want))


def _refused(exc: KafkaError) -> str:
    """The name of what the broker did to a client; a client-side configuration error is
    the test's own bug and is raised, never counted as a refusal."""
    if isinstance(exc, KafkaConfigurationError):
        raise exc
    return type(exc).__name__


def _try_produce(bootstrap: str, **auth) -> str:
    """One record to events with these client settings: 'acked', or what stopped it."""
    try:
        producer = KafkaProducer(bootstrap_servers=bootstrap, request_timeout_ms=5000,
                                 max_block_ms=10000, retries=0, **auth)
    except KafkaError as exc:
        return _refused(exc)
    try:
        producer.send("events", b'{"event_id": "intruder"}').get(timeout=15)
        return "acked"
    except KafkaError as exc:
        return _refused(exc)
    finally:
        producer.close(timeout=5)


def _try_read_alerts(bootstrap: str, **auth) -> str:
    """Read the alerts topic from its start with these settings: 'records', or what
    stopped it."""
    try:
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                 request_timeout_ms=10000, **auth)
    except KafkaError as exc:
        return _refused(exc)
    try:
        partition = TopicPartition("alerts", 0)
        consumer.assign([partition])
        consumer.seek_to_beginning(partition)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:  # bounded: 20 s
            if consumer.poll(timeout_ms=1000, max_records=10):
                return "records"
        return "nothing"
    except KafkaError as exc:
        return _refused(exc)
    finally:
        consumer.close()


def test_a_client_without_credentials_cannot_produce(testbed, kafka):
    """The secured broker (SASL_SSL, SCRAM-SHA-512): plaintext, TLS without a login and a
    wrong password are all turned away, and the events log does not grow."""
    bootstrap = kafka.bootstrap
    ca = str(bed.CLIENT_DIR / "ca.pem")
    before = _broker_metric(testbed, "broker_log_end_offset", topic="events")
    outcomes = {
        "plaintext": _try_produce(bootstrap),
        "TLS, no login": _try_produce(bootstrap, security_protocol="SSL", ssl_cafile=ca),
        "wrong password": _try_produce(bootstrap, **bed.client_security(
            "loadgen", "not-the-password").kafka_python()),
    }
    assert "acked" not in outcomes.values(), outcomes
    assert _broker_metric(testbed, "broker_log_end_offset", topic="events") == before
    # The control: the same send as the loadgen user is acknowledged.
    assert _try_produce(bootstrap, **bed.site_client_security().kafka_python()) == "acked"


def test_a_connection_burst_from_one_host_is_held_off(testbed, kafka):
    """The role's per-IP creation rate (100 a second, a burst of 100): of 300 connections
    the controller opens at once, those over it are closed after a second without a byte
    read (no TLS handshake), the rest wait for their ClientHello; the broker counts them."""
    host, port = kafka.bootstrap.rsplit(":", 1)
    throttled = _broker_metric(testbed, "broker_connections_throttled_total")
    socks = []
    try:
        for _ in range(300):  # well under a second: at most ~100 more tokens refill
            socks.append(socket.create_connection((host, int(port)), timeout=10))
        time.sleep(1.5)  # past THROTTLED_CLOSE_S
        closed = 0
        for sock in socks:
            sock.setblocking(False)
            try:
                closed += sock.recv(1) == b""
            except BlockingIOError:
                pass  # admitted: the broker waits for the TLS hello
            except ConnectionResetError:
                closed += 1
    finally:
        for sock in socks:
            sock.close()
    # a burst of 100 (less what the controller's other clients took in the last second)
    # plus what refilled while connecting were let in; the rest were held off
    assert 50 <= closed <= 250, closed
    # at least those (another client of the controller's may have been held off too)
    assert _broker_metric(testbed, "broker_connections_throttled_total") - throttled >= closed
    time.sleep(1.0)  # the controller's bucket refills for the tests after this one


def test_a_user_without_an_acl_cannot_read_alerts(testbed, kafka):
    """User:auditor logs in (its password is right) but no ACL names it: the alerts stay
    unread and the broker counts the denial; User:forwarder, whose ACL allows it, reads."""
    passwords = testbed.vars["kafka_passwords"]
    auditor = bed.client_security("auditor", passwords["auditor"]).kafka_python()
    forwarder = bed.client_security("forwarder", passwords["forwarder"]).kafka_python()
    denied = _broker_metric(testbed, "broker_authorization_denials_total")
    # Kafka's answer: the topic is not even in its Metadata (TOPIC_AUTHORIZATION_FAILED),
    # so the consumer has nothing to fetch from.
    assert _try_read_alerts(kafka.bootstrap, **auditor) != "records"
    assert _broker_metric(testbed, "broker_authorization_denials_total") > denied
    assert _try_produce(kafka.bootstrap, **auditor) != "acked"
    assert _try_read_alerts(kafka.bootstrap, **forwarder) == "records"


def test_driver_without_the_secret_cannot_register(testbed, deployed):
    master = testbed.one("spark_master")
    status = bed.master_status(master.address)
    assert "appliance" in {a["name"] for a in status["activeapps"]}
    name = bed.unique("rogue")
    # The port the master listens on now (its url), so that "failed to connect" below is
    # the master refusing the driver, not the other of its two ports finding nobody.
    script = (
        "import time\n"
        "from pyspark.sql import SparkSession\n"
        f"s = (SparkSession.builder.master('{status['url']}').appName('{name}')\n"
        "     .config('spark.driver.host', '10.213.0.1')\n"
        "     .config('spark.driver.bindAddress', '10.213.0.1')\n"
        "     .config('spark.ui.enabled', 'false').getOrCreate())\n"
        "time.sleep(120)\n")
    since = testbed.ssh(master, "date +%s").stdout.strip()
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        seen = []
        deadline = time.monotonic() + 45  # two registration attempts (20 s apart)
        while time.monotonic() < deadline and proc.poll() is None:
            status = bed.master_status(master.address)
            seen += [a["name"] for a in status["activeapps"] + status["completedapps"]]
            time.sleep(2)
    finally:
        proc.kill()
        output = proc.communicate(timeout=30)[0]
    assert name not in seen, "a driver without the secret registered an application"
    assert "failed to connect to master" in output.lower(), output[-3000:]
    # ...and it is the master's authentication that turned it away.
    master_log = testbed.ssh(master, f"journalctl -u spark-master --since @{since} -o cat").stdout
    assert "sasl" in master_log.lower(), master_log[-3000:]


def test_worker_reboot_mid_stream_loses_no_alert(testbed, kafka):
    """The worker rebooted runs the pair's active instance too (handed over to it first):
    the other instance takes over, every alert arrives, and the rebooted host's instance
    comes back as the standby."""
    master = testbed.one("spark_master")
    worker = testbed.group("spark_workers")[-1]
    assert worker.name in {h.name for h in testbed.group("appliance")}
    _serving_on(testbed, worker)
    prefix = bed.unique("reboot")
    batches = [bed.make_events(f"{prefix}-{n}", 20) for n in range(30)]
    stop = threading.Event()

    def produce():
        for batch in batches:  # bounded: 30 batches of 20 events, one per second
            if stop.is_set():
                return
            kafka.produce(batch)
            time.sleep(1.0)

    producer = threading.Thread(target=produce)
    producer.start()
    try:
        time.sleep(8)
        testbed.ssh(worker, "systemctl reboot", check=False)
        gone = bed.wait_for(lambda: worker.address not in bed.alive_workers(master.address),
                            timeout=60, interval=0.5)
        assert gone, "the master never noticed the worker going away"
        back = bed.wait_for(lambda: worker.address in bed.alive_workers(master.address),
                            timeout=REJOIN_TIMEOUT_S)
        assert back, f"{worker.name} did not rejoin the master within {REJOIN_TIMEOUT_S} s"
    finally:
        producer.join(timeout=120)
        stop.set()
    expected = {e["event_id"] for batch in batches for e in batch}
    missing = kafka.wait_alerts(expected, ALERT_TIMEOUT_S)
    assert not missing, f"{len(missing)} alerts lost across the reboot, e.g. {sorted(missing)[:5]}"
    assert testbed.ssh(worker, "systemctl is-active spark-worker").stdout.strip() == "active"
    # The partner took over; the rebooted instance started at boot and waits as standby.
    _active, standby = _pair(testbed, timeout=420)
    assert standby.name == worker.name, bed.ha_roles(testbed)


# The master's host: the pair's other instance and every executor are on the workers, so
# the cut takes away the active driver and the Spark master only; shorter than the master's
# worker timeout (spark_master_worker_timeout, 30 s), after which it would drop the workers
# and every application's executors with them.
PARTITION_S = 15.0
PARTITION_REPORT = bed.REPO / "build" / "testbed" / "partition.json"


def test_a_partitioned_active_host_is_replaced_and_steps_down_when_healed(testbed, deployed):
    """The network of the host that runs the pair's active instance cut for PARTITION_S
    (its processes run on, unheard): the partner is elected once the active's session
    lapses and serves, every alert arrives, and with the network back the old active,
    fenced (none of its commits accepted for a session), waits as the standby. The
    election's time and the longest wait for an alert go to build/testbed/partition.json."""
    master, broker = testbed.one("spark_master"), testbed.one("kafka")
    assert master.name in {h.name for h in testbed.group("appliance")}
    _serving_on(testbed, master)
    partner = next(h for h in testbed.group("appliance") if h.name != master.name)
    bootstrap = f"{broker.address}:9092"
    with _Load(bootstrap, "partition") as load:
        time.sleep(8)  # steady before the cut
        cut = time.time()
        with bed.partitioned(master):
            elected = bed.wait_for(lambda: bed.ha_role(partner, timeout=1) == 1,
                                   PARTITION_S, 0.25)
            elected_s = time.time() - cut
            time.sleep(max(0.0, cut + PARTITION_S - time.time()))
        healed = time.time()
        settled = _pair(testbed, timeout=300)
        settled_s = time.time() - healed
        time.sleep(5)  # steady after it
    assert elected, f"{partner.name} was not elected within {PARTITION_S} s of the cut"
    assert (settled[0].name, settled[1].name) == (partner.name, master.name), \
        bed.ha_roles(testbed)
    missing = load.lost(bootstrap)
    assert not missing, \
        f"{len(missing)} of {len(load.sent)} alerts lost, e.g. {sorted(missing)[:5]}"
    waits = load.waits()
    session = tomllib.loads(_host_file(testbed, master, "/etc/appliance/appliance.toml"))
    figures = {"partition_s": PARTITION_S, "session_timeout": session["ha"]["session_timeout"],
               "elected_after_s": round(elected_s, 2), "events": len(load.sent), "lost": 0,
               "longest_wait_s": round(waits[-1], 2),
               "p99_wait_s": round(waits[int(len(waits) * 0.99)], 2),
               "old_active_standby_after_heal_s": round(settled_s, 1)}
    PARTITION_REPORT.write_text(json.dumps(figures, indent=2) + "\n")
    print(f"partition: {json.dumps(figures)}")
    assert not load.failed, f"{len(load.failed)} events the producer could not send"


# -- latency, as an operator measures it from the controller ----------------------------

def _loadgen_metrics(testbed) -> tuple[str, int]:
    """Where the deployed Prometheus scrapes the controller's loadgen (the inventory's
    monitoring_loadgen_targets)."""
    host, port = testbed.vars["monitoring_loadgen_targets"][0].rsplit(":", 1)
    return host, int(port)


@pytest.fixture(scope="module")
def controller_load(testbed, deployed, tmp_path_factory):
    """One load from the controller, scraped by the deployed Prometheus as job loadgen,
    while a downstream reader of the alerts (``kcat -G``, a consumer group committing as
    it goes, as a site runs one) follows the alerts topic: (its report, when it started)."""
    broker = testbed.one("kafka")
    bootstrap = f"{broker.address}:9092"
    metrics_host, metrics_port = _loadgen_metrics(testbed)
    kcat = shutil.which("kcat")
    assert kcat, "kcat is not installed: run `make system-deps`"
    # The reader is the site's own principal (User:forwarder, kafka_broker_extra_acls in
    # the test bed's inventory); its password in a 0600 file (-F), never on argv.
    forwarder = bed.client_security("forwarder", testbed.vars["kafka_passwords"]["forwarder"])
    conf = tmp_path_factory.mktemp("kcat") / "forwarder.conf"
    write_private(conf, "".join(f"{k}={v}\n" for k, v in forwarder.librdkafka().items()))
    bed.LOG_DIR.mkdir(parents=True, exist_ok=True)
    reader_log = bed.LOG_DIR / "kcat-forwarder.log"
    with open(reader_log, "wb") as err:
        reader = subprocess.Popen([kcat, "-F", str(conf), "-b", bootstrap, "-G",
                                   "alert-forwarder", "-q", "-X", "auto.offset.reset=earliest",
                                   "alerts"], stdout=subprocess.DEVNULL, stderr=err)
    started = time.time()
    try:
        report = run_load(LoadConfig(
            bootstrap=bootstrap, rate=LATENCY_RATE, duration=LATENCY_SECONDS,
            grace=ALERT_TIMEOUT_S, floor_seconds=3, drain_s=30.0, progress=False,
            metrics_host=metrics_host, metrics_port=metrics_port, alert_ratio=0.2,
            bad_ratio=0.01, security=bed.site_client_security()))
        time.sleep(2 * SCRAPE_S)  # the group's commits scraped at least once
        # kcat exits on a refused login or a lost group: it must still be reading.
        assert reader.poll() is None, reader_log.read_text()[-2000:]
    finally:
        reader.terminate()
        reader.wait(timeout=30)
    return report, started


def test_loadgen_from_the_controller_gets_every_alert(controller_load):
    report, _started = controller_load
    figures = {"rate": LATENCY_RATE, "seconds": LATENCY_SECONDS, "sent": report.sent,
               "expected_alerts": report.expected_alerts,
               "received_alerts": report.received_alerts, "lost": report.lost,
               "duplicates": report.duplicates, "latency_ms": report.latency_ms,
               "floor_ms": report.floor_ms, "behind_schedule": report.behind_schedule}
    LATENCY_REPORT.write_text(json.dumps(figures, indent=2) + "\n")
    print(f"deployed latency: {json.dumps(figures)}")
    assert report.sent == LATENCY_RATE * LATENCY_SECONDS
    assert report.ok, f"{report.lost} alerts and {report.dlq_lost} dead letters lost"
    assert report.received_alerts == report.expected_alerts > 0


# -- what operators see: the deployed Prometheus, the dashboards ------------------------

def _has_data(result: list[dict]) -> bool:
    return any(math.isfinite(float(v)) for series in result for _t, v in series["values"])


def test_every_dashboard_panel_has_data_from_the_deployed_prometheus(testbed, controller_load):
    """After the load above: every query of every panel of every dashboard, as Grafana
    would send it (All instances), returns a finite sample; every job is scraped."""
    prometheus = f"http://{testbed.one('monitoring').address}:9090"
    targets = bed.prometheus_targets(prometheus)
    assert JOBS <= set(targets), f"jobs not scraped: {JOBS - set(targets)}"
    down = {job: health for job, health in targets.items()
            if job != "loadgen" and set(health) != {"up"}}
    assert not down, down  # loadgen is gone once its run ended
    end = time.time()
    start = controller_load[1] - 30
    empty, checked = [], 0
    for board in catalog.load():
        for panel in board.panels:
            for target in panel.targets:
                expr = catalog.expand(target.expr, step_s=SCRAPE_S, range_s=end - start)
                if not _has_data(bed.prometheus_query_range(prometheus, expr, start, end,
                                                            SCRAPE_S)):
                    empty.append(f"{board.title} / {panel.title}: {expr}")
                checked += 1
    print(f"deployed dashboards: {checked} panel queries, {len(empty)} without data")
    assert checked >= 40
    assert not empty, "queries without data on the deployed site:\n" + "\n".join(empty)
    # The same data as pictures (the README shows the latency dashboard's). The deployed
    # Prometheus asks for its login, which `dashboards render` does not send: this
    # process's urllib does, for that URL only.
    logins = urllib.request.HTTPPasswordMgrWithPriorAuth()
    logins.add_password(None, prometheus, bed.WEB_USER, testbed.vars["monitoring_web_password"],
                        is_authenticated=True)  # sent with every request, not after a 401
    urllib.request.install_opener(urllib.request.build_opener(
        urllib.request.HTTPBasicAuthHandler(logins)))
    try:
        code = appliance_main(["dashboards", "render", "--prometheus", prometheus,
                               "--out", str(DASHBOARD_PNGS), "--range",
                               f"{int(end - start)}s", "--step", "5s"])
    finally:
        urllib.request.install_opener(None)
    assert code == 0
    for board in catalog.load():
        image = matplotlib.image.imread(DASHBOARD_PNGS / f"{board.uid}.png")
        assert image.shape[0] > 100 and image.shape[1] > 100


# -- a worker-only change ---------------------------------------------------------------

@dataclass(frozen=True)
class _WorkerStep:
    """One worker's restart as the master listed it: when its registration from before
    the play was first listed DECOMMISSIONED (drained; None if never), when it was no
    longer listed ALIVE or DECOMMISSIONED (gone), and when a new one was ALIVE (back)."""

    worker: str
    drained: float | None
    gone: float
    back: float


class _MasterWatch:
    """The master's workers, read every 0.5 s while a play runs: (time, host -> {id:
    state}), or (time, None) while the master itself does not answer (its restart)."""

    def __init__(self, address: str) -> None:
        self.address = address
        self.samples: list[tuple[float, dict[str, dict[str, str]] | None]] = []
        self.errors: list[str] = []
        self.ended = 0.0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch)

    def _watch(self) -> None:
        while not self._done.is_set():  # bounded by the play the watch is entered around
            try:
                status = bed.master_status(self.address)
                workers: dict[str, dict[str, str]] = {}
                for w in status.get("workers", []):
                    workers.setdefault(w["host"], {})[w["id"]] = w["state"]
                self.samples.append((time.time(),
                                     workers if status.get("status") == "ALIVE" else None))
            except OSError:
                self.samples.append((time.time(), None))
            except Exception as exc:  # noqa: BLE001 - a dead watch would pass for no change
                self.samples.append((time.time(), None))
                self.errors.append(repr(exc))
            time.sleep(0.5)

    def __enter__(self) -> _MasterWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.ended = time.time()
        self._done.set()
        self._thread.join(timeout=30)

    def alive(self) -> list[tuple[float, set[str]]]:
        """(time, hosts with a registration ALIVE) for each answer of the master."""
        return [(at, {h for h, regs in workers.items() if "ALIVE" in regs.values()})
                for at, workers in self.samples if workers is not None]

    def steps(self, workers) -> list[_WorkerStep]:
        """Each worker's restart, in the order given; asserts each happened."""
        assert self.samples and self.samples[-1][0] >= self.ended - 5, \
            f"the master watch stopped early: {self.errors[-3:]}"
        known = [(at, w) for at, w in self.samples if w is not None]
        steps = []
        for worker in workers:
            first = known[0][1].get(worker.address, {})
            old = next(i for i, state in first.items() if state == "ALIVE")
            states = [(at, w.get(worker.address, {})) for at, w in known]
            drained = next((at for at, regs in states if regs.get(old) == "DECOMMISSIONED"),
                           None)
            gone = next((at for at, regs in states
                         if regs.get(old) not in ("ALIVE", "DECOMMISSIONED")), None)
            assert gone is not None, (f"{worker.name}'s registration never went", first,
                                      states[-1])
            back = next((at for at, regs in states if at >= gone and any(
                state == "ALIVE" for i, state in regs.items() if i != old)), None)
            assert back is not None, f"{worker.name} did not come back: {states[-1]}"
            steps.append(_WorkerStep(worker.name, drained, gone, back))
        return steps


#: `appliance ha handover` as the play ran it: the host it ran on (delegated to, when the
#: workers' play moved the pair off a worker), in play order.
_HANDOVER_TASK = re.compile(
    r"TASK \[(?:appliance : )?Hand over to the standby \(appliance ha handover\)\][^\n]*\n+"
    r"changed: \[(?:[^\]]+ -> )?(?P<host>[^\](]+)(?:\([^)]*\))?\]")


def _handovers(play_output: str) -> list[str]:
    """The hosts on which the play's handover ran (changed), in order."""
    return [m["host"] for m in _HANDOVER_TASK.finditer(play_output)]


def _assert_drained_one_at_a_time(watch: _MasterWatch, steps: list[_WorkerStep]) -> None:
    """Each worker drained before it went, back before the next went, never all down."""
    assert all(s.drained is not None and s.drained < s.gone for s in steps), steps
    for before, after in zip(steps, steps[1:], strict=False):
        assert before.gone < before.back <= after.gone, steps
    assert all(alive for _, alive in watch.alive()), "every worker was down at once"


def test_worker_only_change_restarts_one_worker_at_a_time(testbed, deployed):
    """New worker settings restart the workers one after the other, each drained first
    (the master lists it DECOMMISSIONED) and back ALIVE before the next goes down. Before
    each worker's restart the pair's serving instance is moved off it: the standby
    restarts (its executors on the other worker), waits, and takes over; so with two
    workers each instance restarts once and serves once, and the master keeps running
    (same MainPID)."""
    master = testbed.one("spark_master")
    workers, pair = testbed.group("spark_workers"), testbed.group("appliance")
    active, _standby = _pair(testbed)  # the reboot's instance is back, waiting
    before = {(h.name, unit): bed.main_pid(testbed, h, unit)
              for h, unit in [(master, "spark-master"), *((a, "appliance") for a in pair),
                              *((w, "spark-worker") for w in workers)]}
    with _MasterWatch(master.address) as watch:
        run = bed.run_playbook("--tags", "spark_worker", "-e", "spark_worker_daemon_memory=640m",
                               label="worker-change", timeout=1200)
    assert run.rc == 0, f"worker change failed, see {run.log}"
    after = {key: bed.main_pid(testbed, testbed.hosts[key[0]], key[1]) for key in before}
    for key in (*((w.name, "spark-worker") for w in workers),
                *((a.name, "appliance") for a in pair)):
        assert after[key] not in (0, before[key]), f"{key} was not restarted"
    assert after[(master.name, "spark-master")] == before[(master.name, "spark-master")], \
        "the master was restarted by a worker-only change"
    _assert_drained_one_at_a_time(watch, watch.steps(workers))
    # One handover per worker: the serving instance first, then its partner.
    other = next(h.name for h in pair if h.name != active.name)
    assert _handovers(run.output) == [active.name, other], run.log
    assert _pair(testbed)[0].name == active.name, bed.ha_roles(testbed)


# -- rules updates ----------------------------------------------------------------------

def test_bad_rules_fail_before_any_host_changes(testbed, deployed, tmp_path):
    """The preflight's rules check stops the run before any host is touched. (Not the
    appliance's invocation: an instance of the pair may restart on its own meanwhile, its
    query out of restarts after the workers' restarts before, which the pair covers.)"""
    pair = testbed.group("appliance")
    before = {h.name: _rules_sha(testbed, h) for h in pair}
    bad = tmp_path / "rules.yml"
    bad.write_text("rules:\n  - id: broken\n    severity: critical\n"
                   "    when: \"no_such_column > 1\"\n")
    run = bed.run_playbook("--tags", "rules", "-e", f"appliance_rules_file={bad}",
                           label="bad-rules", timeout=900)
    assert run.rc != 0, f"a bad rules file was accepted, see {run.log}"
    assert "appliance rules check" in run.output or "rules check" in run.output
    assert str(bad) in run.output and "no_such_column" in run.output, run.log
    assert all(r["changed"] == 0 for r in run.recap.values()), run.recap
    assert "PLAY [Common" not in run.output, "the run went past the preflight"
    assert {h.name: _rules_sha(testbed, h) for h in pair} == before


def test_new_rule_rolls_out_without_losing_alerts(testbed, kafka, tmp_path):
    """New rules reach both instances of the pair without a restart: the active one swaps
    them in live, the standby is asked to (it does when it serves)."""
    appliance, standby = _pair(testbed)
    new = _example_rules_and(tmp_path, {"id": "net-errors", "severity": "warning",
                                        "when": "metric = 'net.errors' AND value > 10",
                                        "message": "network errors"})
    before, standby_before = _process(testbed, appliance), _process(testbed, standby)
    prefix = bed.unique("roll")
    old_rule = [bed.make_events(f"{prefix}-old-{n}", 10) for n in range(40)]
    stop = threading.Event()

    def produce():
        for batch in old_rule:  # bounded: 40 batches, one per second, across the update
            if stop.is_set():
                return
            kafka.produce(batch)
            time.sleep(1.0)

    producer = threading.Thread(target=produce)
    producer.start()
    try:
        run = bed.run_playbook("--tags", "rules", "-e", f"appliance_rules_file={new}",
                               label="new-rule", timeout=900)
    finally:
        producer.join(timeout=120)
        stop.set()
    assert run.rc == 0, f"rules update failed, see {run.log}"
    assert run.changed()[appliance.name] > 0 and run.changed()[standby.name] > 0
    # Only the rules: the configuration, the unit and the restart are not run at all.
    for task in ("Render appliance.toml", "Install the appliance unit",
                 "Restart the appliance onto its new packages or configuration"):
        assert f"TASK [appliance : {task}]" not in run.output, f"--tags rules ran {task!r}"
    # Swapped in live: the same unit invocation and main process throughout.
    assert _process(testbed, appliance) == before, "the rules rollout restarted the appliance"
    assert _process(testbed, standby) == standby_before, "the rollout restarted the standby"
    assert _rules_sha(testbed, standby) == _rules_sha(testbed, appliance)
    journal = testbed.ssh(appliance, "journalctl -o cat --no-pager "
                          f"_SYSTEMD_INVOCATION_ID={before[0]}").stdout
    assert '"rules.reloaded"' in journal
    new_rule = bed.make_events(f"{prefix}-new", 20, metric="net.errors", value=50.0)
    kafka.produce(new_rule)
    expected = {e["event_id"] for batch in old_rule for e in batch}
    expected |= {e["event_id"] for e in new_rule}
    missing = kafka.wait_alerts(expected, ALERT_TIMEOUT_S)
    assert not missing, f"{len(missing)} alerts missing, e.g. {sorted(missing)[:5]}"
    swapped = kafka.alerts[new_rule[0]["event_id"]]
    assert swapped["rules"][0]["id"] == "net-errors"
    assert swapped["rules_version"] == rules_version(new.read_bytes())
    checkpoint = _host_file(testbed, appliance, "/etc/appliance/appliance.toml")
    assert "/var/lib/appliance/checkpoints" in checkpoint  # same checkpoint as before


# -- the pair's standby stopped, and Alertmanager says so --------------------------------

def test_alertmanager_delivers_a_firing_alert_when_the_appliance_is_stopped(
        testbed, deployed, webhook):
    """The deployed chain end to end: the pair's standby stopped, Prometheus sees its
    target down, the rules fire after their `for` (the instance is down, and the pair has
    no standby), Alertmanager posts them to the webhook receiver, with the rule's summary
    and a runbook link; the active instance serves on throughout."""
    active, appliance = _pair(testbed)
    stopped = time.time()
    testbed.ssh(appliance, "systemctl stop appliance")
    try:
        # `for: 1m`, the 5 s scrape and evaluation, Alertmanager's 10 s group_wait.
        firing = bed.wait_for(lambda: webhook.firing("ApplianceQueryDown", stopped), 300, 2)
        assert firing, (f"no firing ApplianceQueryDown within 300 s; notifications: "
                        f"{[n.body for n in webhook.notifications][-3:]}")
        alert = firing[0]
        assert alert["labels"]["instance"] == f"{appliance.address}:9464"
        assert alert["labels"]["severity"] == "critical"
        assert alert["_receiver"] == "critical"  # routed by its severity
        assert alert["annotations"]["summary"]
        # An absolute link: the runbook as the monitoring host's Prometheus serves it.
        monitoring = testbed.one("monitoring")
        runbook = alert["annotations"]["runbook_url"]
        assert runbook == (f"http://{monitoring.address}:9090/consoles/runbooks.html"
                           "#appliancequerydown"), runbook
        status, page = bed.http(runbook, bed.web_headers())
        assert status == 200 and b'id="appliancequerydown"' in page, status
        print(f"alert delivered {firing and round(time.time() - stopped)} s after the stop")
        alone = bed.wait_for(lambda: webhook.firing("AppliancePairNoStandby", stopped), 180, 2)
        assert alone and alone[0]["labels"]["group"] == "appliance-pair", alone[:1]
        assert bed.ha_roles(testbed)[active.name] == 1, "the active instance stopped serving"
    finally:
        testbed.ssh(appliance, "systemctl start appliance", check=False)
        _wait_up(testbed, appliance)  # the next tests edit its rules


def test_reload_of_a_file_broken_by_hand_fails_and_changes_nothing(testbed, deployed, kafka,
                                                                   webhook):
    """`systemctl reload appliance` with a rules.yml broken on the host: the reload fails
    (ExecReload= waits for the outcome), the same process keeps running the rules it had,
    and they keep alerting; ApplianceRulesReloadRejected reaches the webhook through the
    warning route. (On the pair's active instance: a standby runs no query to reload.)"""
    appliance, _standby = _pair(testbed)
    rules, backup = "/etc/appliance/rules.yml", "/etc/appliance/rules.yml.before-reload"
    _wait_up(testbed, appliance)  # a start reads the file: break it only after that
    before = _process(testbed, appliance)
    broken = 'rules:\n  - id: Broken-Id\n    severity: info\n    when: "value > 1"\n'
    testbed.ssh(appliance, f"cp -p {rules} {backup} && printf %s {shlex.quote(broken)} "
                f"> {rules}")
    since = time.time()
    try:
        reload = testbed.ssh(appliance, "systemctl reload appliance", check=False)
        assert reload.returncode != 0, "a broken rules file was reloaded"
        assert _process(testbed, appliance) == before
        assert _unit(testbed, appliance, "ActiveState") == {"ActiveState": "active"}
        journal = testbed.ssh(appliance, "journalctl -o cat --no-pager "
                              f"_SYSTEMD_INVOCATION_ID={before[0]}").stdout
        assert '"rules.rejected"' in journal and "Broken-Id" in journal, journal[-2000:]
        events = bed.make_events(bed.unique("after-rejected"), 10)
        kafka.produce(events)
        missing = kafka.wait_alerts({e["event_id"] for e in events}, ALERT_TIMEOUT_S)
        assert not missing, f"the running rules stopped alerting: {sorted(missing)[:5]}"
        rejected = bed.wait_for(
            lambda: webhook.firing("ApplianceRulesReloadRejected", since), 120, 2)
        assert rejected and rejected[0]["_receiver"] == "warning", rejected
    finally:
        testbed.ssh(appliance, f"mv {backup} {rules}", check=False)


# -- it leaves the appliance restarting from a fixed rules file ------------------------

def _unit(testbed, host, *props: str) -> dict[str, str]:
    out = testbed.ssh(host, f"systemctl show -p {','.join(props)} appliance").stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def test_broken_rules_on_the_host_leave_the_unit_failed_not_restarting(testbed, deployed):
    """A hand edit that breaks rules.yml on the host (the play validates every file it
    ships, an editor does not): `appliance run` exits 2, which no restart can fix, so the
    unit stays failed with the one-line reason in its journal, not retrying every few
    seconds forever (StartLimitIntervalSec=0). The pair's standby: its partner serves on."""
    _active, appliance = _pair(testbed)
    rules, backup = "/etc/appliance/rules.yml", "/etc/appliance/rules.yml.before-test"
    broken = ("rules:\\n  - id: broken\\n    severity: dire\\n"
              "    when: \\\"value > 1\\\"\\n    message: edited by hand\\n")
    testbed.ssh(appliance, f"cp -p {rules} {backup} && printf \"{broken}\" > {rules}")
    try:
        testbed.ssh(appliance, "systemctl restart appliance")
        invocation = _invocation(testbed, appliance)
        failed = bed.wait_for(
            lambda: _unit(testbed, appliance, "ActiveState")["ActiveState"] == "failed", 120, 1)
        unit = _unit(testbed, appliance, "ActiveState", "ExecMainStatus", "NRestarts",
                     "RestartUSec")
        assert failed, f"the unit did not fail on the broken rules: {unit}"
        assert unit["ExecMainStatus"] == "2", unit
        assert unit["RestartUSec"] == "2s", unit  # the role's appliance_restart_delay
        time.sleep(10)  # five restart delays: a restart would have happened by now
        later = _unit(testbed, appliance, "ActiveState", "NRestarts")
        assert later == {"ActiveState": "failed", "NRestarts": unit["NRestarts"]}, later
        assert _invocation(testbed, appliance) == invocation, "systemd restarted it"
        journal = testbed.ssh(appliance, "journalctl -o cat --no-pager "
                              f"_SYSTEMD_INVOCATION_ID={invocation}").stdout
        assert "rules.yml: rule 'broken': severity: must be one of" in journal, journal[-2000:]
    finally:
        testbed.ssh(appliance, f"mv {backup} {rules} && systemctl restart appliance",
                    check=False)


# -- last: an upgrade rolls (a new wheel, new spark-defaults, a Java option) under load ----

ROLLING_REPORT = bed.REPO / "build" / "testbed" / "rolling_upgrade.json"
#: Events a second during the upgrade, every one alerting (cpu.util 99).
ROLLING_RATE = 50


def _rebuild_wheel(path) -> None:
    """The same version rebuilt with one file more, its RECORD updated: a new build, as a
    release brings (a new wheel file, same name)."""
    marker = "appliance/_deploy_test_build.txt"
    content = f"{uuid.uuid4()}\n".encode()
    digest = base64.urlsafe_b64encode(hashlib.sha256(content).digest()).rstrip(b"=").decode()
    rebuilt = path.with_suffix(".rebuilt")
    with zipfile.ZipFile(path) as old, zipfile.ZipFile(rebuilt, "w", zipfile.ZIP_DEFLATED) as new:
        for item in old.infolist():
            data = old.read(item.filename)
            if item.filename.endswith(".dist-info/RECORD"):
                data += f"{marker},sha256={digest},{len(content)}\n".encode()
            new.writestr(item, data)
        new.writestr(marker, content)
    rebuilt.replace(path)


def _since_boot_to_wall(testbed, host, unit: str) -> float:
    """When ``unit`` last became active on ``host``, as wall-clock seconds."""
    out = testbed.ssh(host, f"date -d \"$(systemctl show -P ActiveEnterTimestamp {unit})\" "
                      "+%s.%N").stdout
    return float(out)


class _Load:
    """Alerting events at ROLLING_RATE from the controller (a producer that retries while
    the broker restarts), and when each one's alert came back."""

    def __init__(self, bootstrap: str, label: str = "rolling") -> None:
        auth = bed.site_client_security().kafka_python()
        self.producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", retries=30,
                                      retry_backoff_ms=500, request_timeout_ms=10000,
                                      value_serializer=lambda v: json.dumps(v).encode(),
                                      key_serializer=lambda k: k.encode(), **auth)
        self.reader = bed.Kafka(bootstrap, bed.site_client_security())
        self.sent: dict[str, float] = {}
        self.seen: dict[str, float] = {}
        self.failed: list[str] = []
        self.stop = threading.Event()
        self.prefix = bed.unique(label)
        self.threads = [threading.Thread(target=self._produce),
                        threading.Thread(target=self._read)]

    def _produce(self) -> None:
        n = 0
        for _ in range(ROLLING_RATE * 1800):  # bounded: 30 minutes of events
            if self.stop.is_set():
                return
            (event,) = bed.make_events(f"{self.prefix}-{n}", 1)
            n += 1
            self.sent[event["event_id"]] = time.time()
            future = self.producer.send("events", key=event["event_id"], value=event)
            future.add_errback(lambda _exc, eid=event["event_id"]: self.failed.append(eid))
            time.sleep(1.0 / ROLLING_RATE)

    def _read(self) -> None:
        while not self.stop.is_set():  # bounded by stop(), set after the run
            now = time.time()
            for alert_id in list(self.reader.poll_alerts()):
                if alert_id.startswith(self.prefix):
                    self.seen.setdefault(alert_id, now)

    def lost(self, bootstrap: str) -> set[str]:
        """Events sent whose alert has not come, after waiting up to ALERT_TIMEOUT_S more
        for them (an alert found then counts as come now)."""
        missing = set(self.sent) - set(self.seen)
        if missing:
            checker = bed.Kafka(bootstrap, bed.site_client_security())
            try:
                missing = checker.wait_alerts(missing, ALERT_TIMEOUT_S)
                self.seen.update({i: time.time()
                                  for i in set(self.sent) - missing - set(self.seen)})
            finally:
                checker.close()
        return missing

    def waits(self) -> list[float]:
        """Sorted seconds each event waited for its alert."""
        return sorted(self.seen[i] - self.sent[i] for i in self.sent if i in self.seen)

    def per_second(self) -> list[tuple[int, int, float]]:
        """(second from the first send, events sent in it, the longest wait of those):
        where in the run the waits were."""
        if not self.sent:
            return []
        start = min(self.sent.values())
        seconds: dict[int, list[float]] = {}
        for i, at in self.sent.items():
            seconds.setdefault(int(at - start), []).append(
                self.seen[i] - at if i in self.seen else math.inf)
        return [(second, len(w), round(max(w), 2)) for second, w in sorted(seconds.items())]

    def __enter__(self):
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=60)
        self.producer.close(timeout=30)
        self.reader.close()


#: The play's restart of a worker (spark_worker's restart.yml), as ansible-playbook prints it.
_WORKER_RESTART_TASK = re.compile(
    r"TASK \[spark_worker : Restart spark-worker onto its new packages or configuration\]"
    r"[^\n]*\n+changed: \[(?P<host>[^\]]+)\]")


def test_an_upgrade_rolls_through_the_workers_one_at_a_time_then_the_appliance(
        testbed, deployed, wheel, tmp_path):
    """A new wheel, a new spark-defaults entry and a Java option change (the GC log
    option, in spark-defaults and spark-env) in one run, under load: the master first
    (on its other RPC port; it recovers its workers and the applications), then the
    workers one at a time, each drained (listed DECOMMISSIONED), its pair's serving
    instance moved off it (the standby restarted onto the new packages, waiting, handed
    over to) before its restart, and back ALIVE under a new registration before the next
    goes down. With two workers each instance of the pair restarts there and serves once:
    one handover per worker, each before that worker's restart. Every event's alert
    arrives; the longest waits (the whole upgrade's, and each worker's step's) are written
    to rolling_upgrade.json. The upgrade brings new rules too: both instances of the
    running pair take them (a standby restarted onto rules its active instance does not
    serve would be refused), and both end with them."""
    master, broker = (testbed.one(g) for g in ("spark_master", "kafka"))
    workers = testbed.group("spark_workers")
    # Last of this file: the broken-rules test before restarted the standby.
    active, standby = _pair(testbed)
    units = [(master, "spark-master"), *((w, "spark-worker") for w in workers),
             (broker, "appliance-broker"), *((h, "appliance") for h in testbed.group("appliance"))]
    before = {(h.name, u): bed.main_pid(testbed, h, u) for h, u in units}
    master_url = bed.master_status(master.address)["url"]
    _rebuild_wheel(wheel)
    new_rules = _example_rules_and(tmp_path, {"id": "disk-errors", "severity": "warning",
                                              "when": "metric = 'disk.errors' AND value > 0",
                                              "message": "disk errors"})
    new_sha = hashlib.sha256(new_rules.read_bytes()).hexdigest()
    pair = testbed.group("appliance")
    assert all(_rules_sha(testbed, h) != new_sha for h in pair)
    change = ["-e", json.dumps({"spark_common_extra_conf": {"spark.appliance.rolled": "yes"},
                                "spark_gc_log_files": 6,
                                "appliance_rules_file": str(new_rules)})]
    with _Load(f"{broker.address}:9092") as load:
        time.sleep(10)  # steady before the upgrade
        with _MasterWatch(master.address) as watch:
            run = bed.run_playbook(*change, label="rolling-upgrade", timeout=1800)
        time.sleep(10)  # steady after it
    assert run.rc == 0, f"the upgrade failed, see {run.log}"
    after = {key: bed.main_pid(testbed, testbed.hosts[key[0]], key[1]) for key in before}
    assert all(after[k] not in (0, before[k]) for k in before), (before, after)
    # The master came back on its other RPC port, where no worker's own reconnection
    # attempt could reach it while it recovered (spark_master role, "Restarts").
    ports = {f"spark://{master.address}:{p}" for p in (7077, 7079)}
    assert {master_url, bed.master_status(master.address)["url"]} == ports
    steps = watch.steps(workers)
    _assert_drained_one_at_a_time(watch, steps)
    # The pair moved off each worker before its restart: the serving instance handed over
    # first (to the standby just restarted), then its partner, each handover printed
    # before that worker's restart.
    handovers = list(_HANDOVER_TASK.finditer(run.output))
    restarts = list(_WORKER_RESTART_TASK.finditer(run.output))
    assert [m["host"] for m in restarts] == [w.name for w in workers], run.log
    assert [m["host"] for m in handovers[:len(workers)]] == [active.name, standby.name], run.log
    assert all(h.start() < r.start() for h, r in zip(handovers, restarts, strict=False)), run.log
    assert all(r.start() < h.start() for r, h in zip(restarts, handovers[1:], strict=False)), \
        run.log
    _pair(testbed)
    assert {h.name: _rules_sha(testbed, h) for h in pair} == {h.name: new_sha for h in pair}
    # Nothing lost under load; the longest an event waited for its alert.
    missing = load.lost(f"{broker.address}:9092")
    assert not missing, \
        f"{len(missing)} of {len(load.sent)} alerts lost, e.g. {sorted(missing)[:5]}"
    waits = load.waits()

    def step_figures(step: _WorkerStep) -> dict:
        # Events sent from the worker's drain to 5 s after it was back.
        during = [load.seen[i] - load.sent[i] for i in load.sent
                  if i in load.seen and step.drained - 1 <= load.sent[i] <= step.back + 5]
        return {"worker": step.worker, "down_s": round(step.back - step.gone, 1),
                "drained_to_gone_s": round(step.gone - step.drained, 1),
                "events": len(during),
                "longest_wait_s": round(max(during), 2) if during else None}

    start = min(load.sent.values())
    figures = {"events": len(load.sent), "lost": 0, "producer_retried_out": len(load.failed),
               "longest_wait_s": round(waits[-1], 2),
               "p99_wait_s": round(waits[int(len(waits) * 0.99)], 2),
               "workers": [step_figures(s) for s in steps],
               "handovers": [line.strip() for line in run.output.splitlines()
                             if "ha handover:" in line],
               "play_s": round(run.seconds, 1),
               # Seconds from the load's first event: each worker's drain, its old
               # registration gone, the new one ALIVE, each instance's (last) restart;
               # then each second's longest wait.
               "marks": {**{s.worker: [round(t - start, 1) for t in (s.drained, s.gone, s.back)]
                            for s in steps},
                         **{f"{h.name} appliance restarted": round(
                             _since_boot_to_wall(testbed, h, "appliance") - start, 1)
                            for h in pair}},
               "per_second": load.per_second()}
    ROLLING_REPORT.write_text(json.dumps(figures, indent=2) + "\n")
    print("rolling upgrade: " + json.dumps({k: v for k, v in figures.items()
                                            if k != "per_second"}))
    assert not load.failed, f"{len(load.failed)} events the producer could not send"
    # That the upgraded site has converged is the suite's one `--check --diff` pass, on
    # the site's last state (test_external_kafka.py).
