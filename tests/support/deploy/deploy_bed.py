"""Driving the test bed and the playbook from the deploy tests (no assertions here).

Everything runs against the hosts ``make testbed`` boots (scripts/testbed): playbook
runs, ssh commands, the master's JSON status, and Kafka traffic to the broker host. Kafka
traffic only ever goes to the test bed's own addresses (10.213.0.0/24).
"""

from __future__ import annotations

import base64
import contextlib
import functools
import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from dataclasses import dataclass, field
from http.client import HTTPException
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import yaml
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from appliance.client_security import ClientSecurity
from loadgen.kafka_config import load_security

REPO = Path(__file__).resolve().parents[3]
ANSIBLE_DIR = REPO / "ansible"
INVENTORY = ANSIBLE_DIR / "inventories" / "testbed" / "hosts.yml"
TESTBED = [sys.executable, str(REPO / "scripts" / "testbed")]
LOG_DIR = REPO / "build" / "testbed" / "logs"
VENV_BIN = Path(sys.executable).parent

_RECAP = re.compile(r"^(?P<host>\S+)\s+:\s+ok=(?P<ok>\d+)\s+changed=(?P<changed>\d+)\s+"
                    r"unreachable=(?P<unreachable>\d+)\s+failed=(?P<failed>\d+)", re.M)


@dataclass
class PlayResult:
    rc: int
    output: str
    seconds: float
    recap: dict[str, dict[str, int]]
    log: Path

    def changed(self) -> dict[str, int]:
        return {host: r["changed"] for host, r in self.recap.items()}


def run_playbook(*args: str, label: str, timeout: float = 1800,
                 env: dict[str, str] | None = None, inventory: Path = INVENTORY.parent,
                 playbook: str = "site.yml") -> PlayResult:
    """``ansible-playbook -i inventories/testbed site.yml ARGS`` (or another inventory or
    playbook); output kept in a log; ``env`` adds to the controller's environment (e.g.
    GRAFANA_TOKEN)."""
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    log = LOG_DIR / f"play-{label}.log"
    env = dict(os.environ, ANSIBLE_CONFIG=str(ANSIBLE_DIR / "ansible.cfg"),
               ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0",
               PATH=f"{VENV_BIN}:{os.environ.get('PATH', '')}", **(env or {}))
    started = time.monotonic()
    proc = subprocess.run([str(VENV_BIN / "ansible-playbook"), "-i", str(inventory),
                           playbook, *args], cwd=ANSIBLE_DIR, env=env, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
    seconds = time.monotonic() - started
    log.write_text(proc.stdout)
    recap = {m["host"]: {k: int(m[k]) for k in ("ok", "changed", "unreachable", "failed")}
             for m in _RECAP.finditer(proc.stdout)}
    return PlayResult(proc.returncode, proc.stdout, seconds, recap, log)


@dataclass(frozen=True)
class Host:
    name: str
    address: str
    groups: tuple[str, ...]


class Inventory:
    def __init__(self, path: Path = INVENTORY) -> None:
        data = yaml.safe_load(path.read_text())
        self.vars = data["all"]["vars"]
        children = data["all"]["children"]
        self.hosts = {
            name: Host(name, spec["ansible_host"],
                       tuple(g for g, members in children.items()
                             if name in (members.get("hosts") or {})))
            for name, spec in data["all"]["hosts"].items()}

    def group(self, group: str) -> list[Host]:
        return [h for h in self.hosts.values() if group in h.groups]

    def one(self, group: str) -> Host:
        return self.group(group)[0]

    def ssh(self, host: Host, command: str, timeout: float = 120,
            check: bool = True) -> subprocess.CompletedProcess:
        argv = ["ssh", "-i", self.vars["ansible_ssh_private_key_file"], "-o", "BatchMode=yes",
                "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
                "-o", "LogLevel=ERROR", "-o", "ConnectTimeout=5", f"root@{host.address}",
                command]
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                              check=check, stdin=subprocess.DEVNULL)


@contextlib.contextmanager
def partitioned(host: Host):
    """``host`` cut off the test bed's network for the block (``scripts/testbed partition``:
    its processes run on, unheard), plugged back in after it, whatever happened."""
    subprocess.run([*TESTBED, "partition", host.name], check=True, timeout=30)
    try:
        yield
    finally:
        subprocess.run([*TESTBED, "heal", host.name], check=True, timeout=30)


def main_pid(inventory: Inventory, host: Host, unit: str) -> int:
    """The unit's MainPID on the host (0 when it is not running)."""
    return int(inventory.ssh(host, f"systemctl show -P MainPID {unit}").stdout.strip() or 0)


# -- logins the deployed site asks for -------------------------------------------------

@functools.cache
def role_plugin(role: str, name: str):
    """A role's filter plugin ``name`` as a module (its functions are plain Python)."""
    path = ANSIBLE_DIR / "roles" / role / "filter_plugins" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _web_auth():
    """The site role's web_auth plugin: the Spark UIs' token as the play makes it."""
    return role_plugin("site", "web_auth")


@functools.cache
def spark_ui_headers() -> dict[str, str]:
    """What every request to a deployed Spark UI needs (JWSFilter's bearer token)."""
    token = _web_auth().spark_ui_token(Inventory().vars["spark_auth_secret"])
    return {"Authorization": f"Bearer {token}"}


#: The one login of the deployed Prometheus and Alertmanager (monitoring_web_user).
WEB_USER = "admin"


@functools.cache
def web_headers() -> dict[str, str]:
    """Basic auth for the deployed Prometheus and Alertmanager."""
    login = f"{WEB_USER}:{Inventory().vars['monitoring_web_password']}".encode()
    return {"Authorization": "Basic " + base64.b64encode(login).decode()}


def http(url: str, headers: dict[str, str] | None = None, data: bytes | None = None,
         timeout: float = 30) -> tuple[int, bytes]:
    """(status, body) of one request; an HTTP error's status, not an exception."""
    request = urllib.request.Request(url, data=data, headers={
        **(headers or {}), **({"Content-Type": "application/json"} if data else {})})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def master_status(address: str, port: int = 8080) -> dict:
    """The master's /json/ page; OSError for any answer that is not one (a master that is
    restarting may cut the body short or answer with something else)."""
    try:
        status, body = http(f"http://{address}:{port}/json/", spark_ui_headers(), timeout=10)
        if status != 200:
            raise OSError(f"the master's /json/ answered {status}")
        return json.loads(body)
    except (HTTPException, ValueError) as exc:  # (``http`` here is the function above)
        raise OSError(f"the master's /json/: {exc!r}") from exc


def alive_workers(address: str) -> dict[str, int]:
    """host -> cores of every worker the master lists ALIVE."""
    try:
        status = master_status(address)
    except OSError:
        return {}
    return {w["host"]: w["cores"] for w in status.get("workers", []) if w["state"] == "ALIVE"}


#: The appliance's metrics port on the test bed (the site role's appliance_metrics_port).
APPLIANCE_METRICS_PORT = 9464
_HA_ROLE = re.compile(r"^appliance_ha_role\{[^}]*\} (?P<value>\S+)$", re.M)


def ha_role(host: Host, timeout: float = 5) -> float | None:
    """The host's ``appliance_ha_role`` (1 active, 0 standby, -1 fenced), from its metrics
    endpoint; None where it does not answer or reports no role."""
    try:
        status, body = http(f"http://{host.address}:{APPLIANCE_METRICS_PORT}/metrics",
                            timeout=timeout)
    except (OSError, HTTPException):
        status, body = 0, b""
    found = _HA_ROLE.search(body.decode(errors="replace")) if status == 200 else None
    return float(found["value"]) if found else None


def ha_roles(inventory: Inventory) -> dict[str, float | None]:
    """Each appliance host's ``ha_role``."""
    return {host.name: ha_role(host) for host in inventory.group("appliance")}


def pair_settled(inventory: Inventory) -> tuple[Host, Host] | None:
    """(active, standby) once one appliance host serves and the other waits; else None."""
    roles = ha_roles(inventory)
    active = [h for h in inventory.group("appliance") if roles[h.name] == 1]
    standby = [h for h in inventory.group("appliance") if roles[h.name] == 0]
    return (active[0], standby[0]) if len(active) == len(standby) == 1 else None


def wait_for(predicate, timeout: float, interval: float = 2.0):
    """Poll ``predicate`` until it returns something truthy or ``timeout`` s pass."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(interval)


# -- Kafka traffic ----------------------------------------------------------------------

def make_events(prefix: str, count: int, metric: str = "cpu.util",
                value: float = 99.0) -> list[dict]:
    now = time.time() * 1000
    return [{"event_id": f"{prefix}-{i}", "ts": now, "source": f"host-{i % 5}",
             "metric": metric, "value": value} for i in range(count)]


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


#: The controller's client settings the play writes for the secured site broker
#: (group_vars kafka_client_dir): loadgen.toml, loadgen.env (0600), ca.pem.
CLIENT_DIR = REPO / "build" / "site-client"


def site_client_security(directory: Path = CLIENT_DIR) -> ClientSecurity:
    """The loadgen user's settings as an operator uses them: loadgen.toml with the
    password from loadgen.env (``set -a; . loadgen.env``), read by loadgen's own loader."""
    environ = {}
    for line in (directory / "loadgen.env").read_text().splitlines():
        name, sep, value = line.partition("=")
        if sep and not line.startswith("#"):
            environ[name.strip()] = shlex.split(value)[0]
    return load_security(str(directory / "loadgen.toml"), environ=environ)


def client_security(user: str, password: str,
                    ca: Path = CLIENT_DIR / "ca.pem") -> ClientSecurity:
    """Another user of the secured site broker (a downstream reader, one without ACLs)."""
    return ClientSecurity.from_properties({
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": user, "sasl.password": password,
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(ca)})


class Kafka:
    """Producer and alerts reader against the broker host (kafka-python), as the given
    user of the secured broker."""

    def __init__(self, bootstrap: str, security: ClientSecurity) -> None:
        self.bootstrap = bootstrap
        auth = security.kafka_python()
        self.producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5,
                                      value_serializer=lambda v: json.dumps(v).encode(),
                                      key_serializer=lambda k: k.encode(), **auth)
        self.consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                      consumer_timeout_ms=1000, **auth)
        partitions = self.consumer.partitions_for_topic("alerts") or {0}
        self.alert_partitions = [TopicPartition("alerts", p) for p in sorted(partitions)]
        self.consumer.assign(self.alert_partitions)
        self.consumer.seek_to_beginning(*self.alert_partitions)
        self.alerts: dict[str, dict] = {}

    def produce(self, events: list[dict]) -> None:
        for event in events:
            self.producer.send("events", key=event["event_id"], value=event)
        self.producer.flush(timeout=60)

    def poll_alerts(self) -> dict[str, dict]:
        for records in self.consumer.poll(timeout_ms=1000, max_records=10000).values():
            for record in records:
                alert = json.loads(record.value)
                self.alerts[alert["alert_id"]] = alert
        return self.alerts

    def wait_alerts(self, ids: set[str], timeout: float) -> set[str]:
        """Poll until every id in ``ids`` has an alert or ``timeout``; the missing ids."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            missing = ids - self.poll_alerts().keys()
            if not missing:
                return set()
        return ids - self.poll_alerts().keys()

    def close(self) -> None:
        self.producer.close(timeout=10)
        self.consumer.close()


# -- Prometheus and Alertmanager on the monitoring host ---------------------------------

def prometheus_query_range(url: str, expr: str, start: float, end: float,
                           step: float) -> list[dict]:
    params = urllib.parse.urlencode({"query": expr, "start": f"{start:.3f}",
                                     "end": f"{end:.3f}", "step": f"{step:g}"})
    doc = json.loads(http(f"{url}/api/v1/query_range?{params}", web_headers())[1])
    if doc.get("status") != "success":
        raise RuntimeError(f"{expr!r}: {doc}")
    return doc["data"]["result"]


def prometheus_targets(url: str) -> dict[str, list[str]]:
    """job -> health of each of its active targets."""
    active = json.loads(http(f"{url}/api/v1/targets", web_headers())[1])["data"]["activeTargets"]
    out: dict[str, list[str]] = {}
    for target in active:
        out.setdefault(target["labels"]["job"], []).append(target["health"])
    return out


@dataclass
class Notification:
    received: float
    body: dict


@dataclass
class AlertWebhook:
    """The receiver Alertmanager's webhook posts to: records every notification's JSON."""

    host: str
    port: int
    notifications: list[Notification] = field(default_factory=list)

    def __post_init__(self) -> None:
        notifications = self.notifications

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                notifications.append(Notification(time.time(),
                                                  json.loads(self.rfile.read(length))))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer((self.host, self.port), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def firing(self, alertname: str, since: float, **labels: str) -> list[dict]:
        """Alerts named ``alertname`` (with these labels) that a notification received
        after ``since`` said were firing; each with the receiver it was routed to
        (``_receiver``)."""
        return [{**alert, "_receiver": n.body.get("receiver")}
                for n in list(self.notifications) if n.received >= since
                for alert in n.body.get("alerts", [])
                if alert["labels"].get("alertname") == alertname
                and all(alert["labels"].get(k) == v for k, v in labels.items())
                and alert.get("status") == "firing"]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
