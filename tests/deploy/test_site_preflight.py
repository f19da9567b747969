"""The site-wide preflight (roles/site/tasks/preflight.yml). The deploy's variables take
the precedence Ansible users expect: role defaults < inventory group_vars/all <
group_vars/<group> < host_vars < -e; the settings every host must agree on are checked
to; an inventory that names two Kafkas, a broker on two hosts, a placeholder or short
secret, or an unsupported platform stops the run with one line naming what to change.

No test bed: an inventory of three hosts that are all this machine (connection local), in
the test bed's groups, run through site.yml's preflight (`--tags preflight`, which
changes no host). The preflight shows each host's settings (`-v`) before it checks that
they agree, so one run shows what every host would use and the one line naming the hosts
that differ.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

ANSIBLE_DIR = Path(__file__).resolve().parents[2] / "ansible"
VENV_BIN = Path(sys.executable).parent
HOSTS = {"h-master": ("spark_master", "appliance"),
         "h-worker1": ("spark_workers", "kafka", "monitoring"),
         "h-worker2": ("spark_workers",)}
SECRETS = {"spark_auth_secret": "a-test-secret-of-32-characters..",
           "monitoring_web_password": "a-web-password-for-tests",
           "kafka_passwords": {"admin": "admin-password-for-tests",
                               "appliance": "appliance-pw-for-tests",
                               "loadgen": "loadgen-password-for-tests"}}


def write_inventory(root: Path, group_vars: dict[str, dict], host_vars: dict[str, dict],
                    hosts: dict[str, tuple[str, ...]] = HOSTS) -> Path:
    """An inventory directory as an operator keeps one: hosts.yml, group_vars/all/*.yml
    (site settings and the vault), group_vars/<group>.yml, host_vars/<host>.yml."""
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
             "cluster_address": "127.0.0.1"}
    groups: dict[str, dict] = {}
    for host, member_of in hosts.items():
        for group in member_of:
            groups.setdefault(group, {"hosts": {}})["hosts"][host] = None
    (root / "group_vars" / "all").mkdir(parents=True)
    (root / "host_vars").mkdir()
    (root / "hosts.yml").write_text(yaml.safe_dump(
        {"all": {"hosts": {h: dict(local) for h in hosts}, "children": groups}}))
    (root / "group_vars" / "all" / "vault.yml").write_text(yaml.safe_dump(SECRETS))
    for group, values in group_vars.items():
        path = root / "group_vars" / ("all/site.yml" if group == "all" else f"{group}.yml")
        path.write_text(yaml.safe_dump(values))
    for host, values in host_vars.items():
        (root / "host_vars" / f"{host}.yml").write_text(yaml.safe_dump(values))
    return root


def preflight(inventory: Path, *extra: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0",
               ANSIBLE_CALLBACK_RESULT_FORMAT="json",
               PATH=f"{VENV_BIN}:{os.environ.get('PATH', '')}")
    return subprocess.run(
        [str(VENV_BIN / "ansible-playbook"), "-i", str(inventory), "site.yml", "-v",
         "--tags", "preflight", "--skip-tags", "packages,rules_check",
         "-e", f"kafka_tls_dir={inventory / 'pki'}", *extra],
        cwd=ANSIBLE_DIR, env=env, capture_output=True, text=True, timeout=600)


_SHOWN = re.compile(r"^ok: \[(?P<host>[\w-]+)\] => (?P<body>\{.*?^\})", re.M | re.S)


def settings_shown(run: subprocess.CompletedProcess) -> dict[str, dict]:
    """host -> the settings the preflight says it would use."""
    section = run.stdout.split("Show the settings every host uses", 1)[1]
    section = section.split("TASK [", 1)[0]
    return {m["host"]: json.loads(m["body"])["msg"] for m in _SHOWN.finditer(section)}


def layered(root: Path) -> Path:
    """Each of the three must-agree settings set at every level: group_vars/all (the usual
    place) for every host, group_vars/spark_workers over it, host_vars of one worker over
    that. The Kafka settings there point the site at an existing cluster, with no kafka
    group."""
    hosts = {name: tuple(g for g in groups if g != "kafka") for name, groups in HOSTS.items()}
    return write_inventory(
        root,
        group_vars={
            "all": {"appliance_trigger": "realtime",
                    "appliance_kafka_bootstrap": "kafka-1.example:9093",
                    "kafka_security_protocol": "SASL_PLAINTEXT"},
            "spark_workers": {"appliance_trigger": "microbatch",
                              "appliance_kafka_bootstrap": "kafka-2.example:9093",
                              "kafka_security_protocol": "SSL"},
        },
        host_vars={"h-worker2": {"appliance_trigger": "continuous",
                                 "appliance_kafka_bootstrap": "kafka-3.example:9093",
                                 "kafka_security_protocol": "PLAINTEXT"}},
        hosts=hosts)


def example_vault_with_a_short_secret(root: Path) -> Path:
    """The example vault as it comes (every value "change-me-..."), and one secret too
    short."""
    example = yaml.safe_load((ANSIBLE_DIR / "inventories" / "example" / "group_vars" / "all"
                              / "vault.yml.example").read_text())
    example["kafka_passwords"]["loadgen"] = "short"
    write_inventory(root, group_vars={}, host_vars={})
    (root / "group_vars" / "all" / "vault.yml").write_text(yaml.safe_dump(example))
    return root


def plain(group_vars: dict | None = None, hosts: dict = HOSTS):
    """An inventory with ``group_vars`` (no host_vars) over ``hosts``."""
    return lambda root: write_inventory(root, group_vars=group_vars or {}, host_vars={},
                                        hosts=hosts)


PAIR = {**HOSTS, "h-worker2": ("spark_workers", "appliance")}
THREE_APPLIANCES = {name: (*groups, "appliance") if "appliance" not in groups else groups
                    for name, groups in HOSTS.items()}
UNSUPPORTED = {"site_supported_platforms": [{"distribution": "Debian", "major_version": "13",
                                             "architecture": "aarch64",
                                             "debian_arch": "arm64"}]}
EXTRA = {"appliance_trigger": "realtime", "appliance_kafka_bootstrap": "kafka-9.example:9093",
         "kafka_security_protocol": "SASL_SSL"}

#: Every preflight run of this file: its inventory and its -e. They only read what they are
#: given, so the fixture below runs them side by side (one after the other they were the
#: slowest file of `make test`, 5.5 min of ansible-playbook starts).
CASES = {
    "layered": (layered, {}),
    "layered, -e": (layered, EXTRA),
    "defaults": (plain(), {}),
    "trigger for the appliance group": (plain({"appliance": {"appliance_trigger": "realtime"}}),
                                        {}),
    "kafka group and a cluster": (plain({"all": {
        "appliance_kafka_bootstrap": "kafka-1.example:9093"}}), {}),
    "broker on two hosts": (plain(hosts={**HOSTS, "h-worker2": ("spark_workers", "kafka")}), {}),
    "example vault": (example_vault_with_a_short_secret, {}),
    "unsupported platform": (plain(), UNSUPPORTED),
    "three appliance hosts": (plain(hosts=THREE_APPLIANCES), {}),
    "pair without cores": (plain(hosts=PAIR), {}),
    "pair with cores": (plain({"all": {"appliance_spark_cores_max": 4,
                                       "appliance_spark_executor_cores": 2,
                                       "appliance_ha_session_timeout": 8}}, hosts=PAIR), {}),
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, subprocess.CompletedProcess]:
    """Each case's preflight run, three at a time (the inventories written first: pytest's
    temporary directories are made one at a time)."""
    argv = {name: (build(tmp_path_factory.mktemp("inventory")),
                   *(("-e", json.dumps(extra)) if extra else ()))
            for name, (build, extra) in CASES.items()}
    with ThreadPoolExecutor(max_workers=3) as pool:
        done = pool.map(lambda args: preflight(*args), argv.values())
        return dict(zip(argv, done, strict=True))


def test_each_level_wins_over_the_one_before_and_the_hosts_that_differ_are_named(runs):
    run = runs["layered"]
    assert run.returncode != 0, run.stdout[-4000:]
    shown = settings_shown(run)
    used = {host: (s["appliance_trigger"], s["kafka_bootstrap_servers"],
                   s["kafka_security_protocol"]) for host, s in shown.items()}
    assert used == {
        "h-master": ("realtime", "kafka-1.example:9093", "SASL_PLAINTEXT"),    # group_vars/all
        "h-worker1": ("microbatch", "kafka-2.example:9093", "SSL"),            # group_vars/<group>
        "h-worker2": ("continuous", "kafka-3.example:9093", "PLAINTEXT"),      # host_vars
    }, run.stdout[-4000:]
    # One line per setting, naming each value's hosts; nothing deployed.
    lines = [line for line in run.stdout.splitlines()
             if line.startswith("[ERROR]") and "differs across hosts" in line]
    assert len(lines) == 1, run.stdout[-4000:]
    message = lines[0]
    assert ('appliance_trigger differs across hosts ("realtime" on h-master; '
            '"microbatch" on h-worker1; "continuous" on h-worker2)') in message, message
    assert 'kafka_security_protocol differs across hosts' in message
    assert '"kafka-2.example:9093" on h-worker1' in message
    assert "changed=0" in run.stdout


def test_extra_vars_win_over_every_level(runs):
    """-e: every host uses it, they agree, and the site checks pass."""
    run = runs["layered, -e"]
    shown = settings_shown(run)
    assert {h: (s["appliance_trigger"], s["kafka_bootstrap_servers"],
                s["kafka_security_protocol"]) for h, s in shown.items()} == {
        h: ("realtime", "kafka-9.example:9093", "SASL_SSL") for h in HOSTS}
    assert "differs across hosts" not in run.stdout
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]


def test_role_defaults_apply_where_the_inventory_says_nothing(runs):
    """No setting anywhere: every host uses the site role's defaults (the site's own
    broker on the kafka host, SASL_SSL, continuous), and the run passes."""
    run = runs["defaults"]
    shown = settings_shown(run)
    assert {h: (s["appliance_trigger"], s["kafka_bootstrap_servers"],
                s["kafka_security_protocol"]) for h, s in shown.items()} == {
        h: ("continuous", "127.0.0.1:9092", "SASL_SSL") for h in HOSTS}
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]


def test_a_trigger_set_for_the_appliance_group_only_is_refused(runs):
    """The issue's case: group_vars/appliance.yml wins on the appliance's host only, so the
    Spark JVMs elsewhere would get another trigger's tuning: refused, naming the hosts."""
    run = runs["trigger for the appliance group"]
    assert run.returncode != 0
    assert ('appliance_trigger differs across hosts ("realtime" on h-master; "continuous" on '
            'h-worker1, h-worker2): set it once, for every host (group_vars/all)') \
        in run.stdout, run.stdout[-4000:]


def _error_line(run: subprocess.CompletedProcess) -> str:
    """The failed check's one line (Ansible's [ERROR] line, its prefix dropped)."""
    lines = [line for line in run.stdout.splitlines() if line.startswith("[ERROR]")]
    assert run.returncode != 0 and lines, run.stdout[-4000:]
    return lines[0].split("Action failed: ", 1)[-1]


def test_a_kafka_group_and_an_existing_cluster_together_are_refused(runs):
    run = runs["kafka group and a cluster"]
    assert _error_line(run) == (
        "the inventory names both a kafka group (h-worker1) and appliance_kafka_bootstrap "
        "(kafka-1.example:9093): list one host in the kafka group for the site's own broker, "
        "or set appliance_kafka_bootstrap to an existing cluster's brokers "
        "(inventories/external-kafka)")
    assert "changed=0" in run.stdout


def test_a_broker_on_two_hosts_is_refused(runs):
    line = _error_line(runs["broker on two hosts"])
    assert line.startswith("the kafka group has 2 hosts (h-worker1, h-worker2), but the "
                           "site's broker does not replicate"), line
    assert "point appliance_kafka_bootstrap at a replicated Kafka cluster" in line


def test_placeholders_and_short_secrets_are_refused_naming_the_variables(runs):
    """The example vault as it comes (every value "change-me-..."), and one secret too
    short: each named, no value shown."""
    line = _error_line(runs["example vault"])
    assert line == (
        "spark_auth_secret is still the example vault's placeholder; "
        "kafka_passwords.admin is still the example vault's placeholder; "
        "kafka_passwords.appliance is still the example vault's placeholder; "
        "kafka_passwords.loadgen is shorter than 12 characters; "
        "monitoring_web_password is still the example vault's placeholder "
        "(the vault: group_vars/all/vault.yml)"), line
    assert "short" not in line.replace("shorter", "")


def test_an_unsupported_platform_is_refused_in_one_line(runs):
    line = _error_line(runs["unsupported platform"])
    assert line.startswith("h-") and line.endswith(
        'is not a supported platform (supported: Debian 13 aarch64; ansible/README.md, '
        '"Supported platforms")'), line


def test_three_appliance_hosts_are_refused_in_one_line(runs):
    """One appliance host is a single instance, two a pair; any other count stops the run."""
    line = _error_line(runs["three appliance hosts"])
    assert line == ("the appliance group has 3 hosts (h-master, h-worker1, h-worker2): list "
                    "one (a single instance) or two (an active/standby pair)"), line


def test_a_pair_without_its_share_of_the_workers_cores_is_refused(runs):
    """Two applications on one cluster: the first would take every core, the second none."""
    line = _error_line(runs["pair without cores"])
    assert line.startswith("appliance: the appliance group's two hosts run a pair"), line
    assert "set appliance_spark_cores_max" in line and "got 0" in line, line


def test_a_pair_with_its_cores_passes_the_appliances_own_config_check(runs):
    """Each host's appliance.toml, [ha] included, loads with the appliance's validation."""
    run = runs["pair with cores"]
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    checked = re.findall(r"TASK \[appliance : Run appliance config check on them\].*?(?=TASK \[)",
                         run.stdout, re.S)
    assert checked and "h-master" in checked[0] and "h-worker2" in checked[0], checked
