"""The multi-host test bed for the Ansible deploy: real Debian hosts booting systemd.

``up`` (idempotent) builds, once, a bookworm root filesystem with mmdebstrap, then for
each host: a network namespace with a veth on the bridge ``tbbr0`` (10.213.0.0/24, the
bridge address is the controller's side), an overlay of the shared root filesystem, its
own cgroups, and a supervisor running ``systemd-nspawn --boot``. Hosts reach nothing but
the bridge: ``net.ipv4.ip_forward`` stays 0 and the only way out is the forward proxy on
the bridge address, which lets apt reach the Debian mirror and nothing else. Ansible
connects as root with an ssh key generated here; ``hosts.yml`` is written for it.

``down`` removes every process, cgroup, mount, namespace, veth and the bridge ``up`` made,
and the hosts' overlays (the next ``up`` boots fresh hosts); the root filesystem and the
ssh key stay cached.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import aptsource

REPO = Path(__file__).resolve().parents[2]
STATE = Path(os.environ.get("TESTBED_DIR", REPO / "build" / "testbed"))
INVENTORY = REPO / "ansible" / "inventories" / "testbed" / "hosts.yml"
HERE = Path(__file__).resolve().parent

SUBNET_PREFIX = "10.213.0"
BRIDGE = "tbbr0"
BRIDGE_ADDRESS = f"{SUBNET_PREFIX}.1"
PROXY_PORT = 3142
# The controller's side of the bridge also serves what the deployed monitoring reaches
# back for during a test: a load generator's metrics (scraped as job `loadgen`) and a
# webhook receiving Alertmanager's notifications. Only the test bed's hosts see these.
LOADGEN_METRICS_PORT = 9466
ALERT_WEBHOOK_PORT = 9467
CGROUP_ROOTS = (Path("/sys/fs/cgroup/systemd"), Path("/sys/fs/cgroup/unified"))
CGROUP_NAME = "appliance-testbed"
SUITE = "bookworm"
PACKAGES = ("systemd", "systemd-sysv", "dbus", "openssh-server", "python3", "iproute2",
            "procps")
# Also in the cached image: the JRE and venv support the deploy's common role installs
# with apt. Unpacking a JRE takes minutes per host under a loaded sandbox's syscall layer;
# baked in once, the role's apt task finds them present (and still installs anything
# else, like Prometheus, through the proxy). A real host gets them from its apt source.
PRESEEDED = ("openjdk-17-jre-headless", "python3-venv")
# Bump when the root filesystem's recipe changes: the cached one is then rebuilt.
ROOTFS_RECIPE = 2
BOOT_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Host:
    name: str           # inventory and host name
    short: str          # for interface names (veth names have 15 characters at most)
    address: str
    groups: tuple[str, ...]

    @property
    def netns(self) -> str:
        return f"tb-{self.short}"

    @property
    def veth(self) -> str:
        return f"tbv-{self.short}"

    @property
    def dir(self) -> Path:
        return STATE / "hosts" / self.short

    @property
    def root(self) -> Path:
        return self.dir / "root"

    @property
    def pidfile(self) -> Path:
        return STATE / "run" / f"{self.short}.pid"

    @property
    def uuid(self) -> str:
        return str(uuid.uuid5(uuid.NAMESPACE_DNS, f"{self.name}.appliance-testbed"))

    def cgroups(self) -> list[Path]:
        return [root / CGROUP_NAME / self.short for root in CGROUP_ROOTS]


# Three hosts share the site's roles (2 cores, shared with others): the Spark master and
# the appliance (its driver) on one, the broker and Prometheus on a worker, and a second
# worker that tests may reboot without touching the broker; it runs the appliance's
# partner too (an active/standby pair), which a reboot hands over from. A fourth host
# is no part of the site: it stands for a Kafka cluster the site already has (its owner
# sets it up, not site.yml; tests/deploy/test_external_kafka.py).
HOSTS = (
    Host("tb-master", "master", f"{SUBNET_PREFIX}.11", ("spark_master", "appliance")),
    Host("tb-worker1", "worker1", f"{SUBNET_PREFIX}.12",
         ("spark_workers", "kafka", "monitoring")),
    Host("tb-worker2", "worker2", f"{SUBNET_PREFIX}.13", ("spark_workers", "appliance")),
    Host("tb-kafka", "kafka", f"{SUBNET_PREFIX}.14", ("existing_kafka",)),
)
GROUPS = ("spark_master", "spark_workers", "kafka", "appliance", "monitoring")
#: The existing cluster's own inventory (its owner's), written beside the site's.
EXISTING_KAFKA_INVENTORY = INVENTORY.parent.parent / "testbed-existing-kafka" / "hosts.yml"


def log(message: str) -> None:
    print(f"testbed: {message}", flush=True)


def run(*argv: str, check: bool = True, quiet: bool = False) -> subprocess.CompletedProcess:
    return subprocess.run(argv, check=check, text=True,
                          stdout=subprocess.PIPE if quiet else None,
                          stderr=subprocess.PIPE if quiet else None)


def exists(*argv: str) -> bool:
    return run(*argv, check=False, quiet=True).returncode == 0


def alive(pidfile: Path) -> int | None:
    try:
        pid = int(pidfile.read_text())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return None
    return pid


# -- root filesystem --------------------------------------------------------------------

def rootfs_key(mirror: aptsource.Mirror) -> str:
    text = json.dumps([ROOTFS_RECIPE, SUITE, PACKAGES, PRESEEDED, mirror.uris],
                      sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def build_rootfs(mirror: aptsource.Mirror) -> Path:
    """The shared, read-only lower layer of every host; built once per recipe."""
    key = rootfs_key(mirror)
    rootfs = STATE / f"rootfs-{key}"
    if (rootfs / ".complete").exists():
        return rootfs
    tmp = STATE / f"rootfs-{key}.tmp"
    if tmp.exists():
        shutil.rmtree(tmp)
    log(f"building the {SUITE} root filesystem with mmdebstrap (once; ~1-3 min)")
    started = time.monotonic()
    argv = ["mmdebstrap", "--variant=minbase", f"--include={','.join(PACKAGES + PRESEEDED)}",
            *(f"--aptopt={opt}" for opt in mirror.apt_options()),
            # Hosts identify themselves: an empty machine-id is filled in at boot.
            "--customize-hook=echo -n > \"$1/etc/machine-id\"",
            "--customize-hook=rm -f \"$1/var/lib/dbus/machine-id\"",
            # Throw-away hosts: dpkg need not fsync every file it unpacks.
            "--customize-hook=echo force-unsafe-io > \"$1/etc/dpkg/dpkg.cfg.d/testbed\"",
            SUITE, str(tmp), *mirror.sources_lines()]
    env = dict(os.environ, **mirror.proxy_env())
    subprocess.run(argv, check=True, env=env)
    (tmp / ".complete").write_text(f"{key}\n")
    tmp.rename(rootfs)
    log(f"root filesystem ready in {time.monotonic() - started:.0f} s: {rootfs}")
    return rootfs


def prune_rootfs(mirror: aptsource.Mirror) -> None:
    """Drop root filesystems of older recipes (only when no host uses one)."""
    keep = STATE / f"rootfs-{rootfs_key(mirror)}"
    for old in STATE.glob("rootfs-*"):
        if old != keep:
            shutil.rmtree(old, ignore_errors=True)


# -- ssh key, secret --------------------------------------------------------------------

def ssh_key() -> Path:
    key = STATE / "ssh" / "id_ed25519"
    if not key.exists():
        key.parent.mkdir(parents=True, exist_ok=True)
        run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "appliance-testbed",
            "-f", str(key))
    return key


def _secret_file(name: str, make: Callable[[], str]) -> str:
    """The text of the bed's private file ``name`` (0600), written once from ``make()``:
    the bed's stand-in for a site's vault."""
    path = STATE / name
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(make())
    return path.read_text().strip()


def spark_secret() -> str:
    """The test bed's Spark RPC secret (an operator would keep theirs in a vault)."""
    return _secret_file("spark-secret", lambda: secrets.token_urlsafe(32))


#: The test bed's broker users: the product's three, a downstream reader of the alerts
#: (its ACLs are the inventory's kafka_broker_extra_acls) and one with no ACL at all.
KAFKA_USERS = ("admin", "appliance", "loadgen", "forwarder", "auditor")


def kafka_passwords() -> dict[str, str]:
    """The test bed's broker passwords (an operator would keep theirs in a vault)."""
    return json.loads(_secret_file("kafka-passwords.json", lambda: json.dumps(
        {user: secrets.token_urlsafe(24) for user in KAFKA_USERS})))


def web_password() -> str:
    """The login of the test bed's Prometheus and Alertmanager (a vault's, elsewhere)."""
    return _secret_file("web-password", lambda: secrets.token_urlsafe(24))


# -- network ----------------------------------------------------------------------------

def bridge_up() -> None:
    if not exists("ip", "link", "show", BRIDGE):
        run("ip", "link", "add", BRIDGE, "type", "bridge")
    if BRIDGE_ADDRESS not in run("ip", "-o", "addr", "show", "dev", BRIDGE, quiet=True).stdout:
        run("ip", "addr", "add", f"{BRIDGE_ADDRESS}/24", "dev", BRIDGE)
    run("ip", "link", "set", BRIDGE, "up")


def host_network_up(host: Host) -> None:
    if not Path(f"/run/netns/{host.netns}").exists():
        run("ip", "netns", "add", host.netns)
    if not exists("ip", "link", "show", host.veth):
        run("ip", "link", "add", host.veth, "type", "veth", "peer", "name", "eth0",
            "netns", host.netns)
    run("ip", "link", "set", host.veth, "master", BRIDGE, "up")
    ns = ("ip", "-n", host.netns)
    if f"{host.address}/" not in run(*ns, "-o", "addr", "show", "dev", "eth0",
                                     quiet=True).stdout:
        run(*ns, "addr", "add", f"{host.address}/24", "dev", "eth0")
    run(*ns, "link", "set", "eth0", "up")
    run(*ns, "link", "set", "lo", "up")


# -- hosts ------------------------------------------------------------------------------

def mounted(path: Path) -> bool:
    target = str(path)
    with open("/proc/self/mounts") as fh:
        return any(line.split()[1] == target for line in fh)


def write_host_files(host: Host, upper: Path, pubkey: str) -> None:
    """Per-host files, written into the overlay's upper layer before the first boot."""
    files = {
        "etc/hostname": f"{host.name}\n",
        "etc/hosts": "127.0.0.1 localhost\n" + "".join(
            f"{h.address} {h.name}\n" for h in HOSTS),
        "root/.ssh/authorized_keys": pubkey,
        # No DNS on the bridge: apt goes through the proxy, which resolves mirror names.
        "etc/apt/apt.conf.d/01testbed-proxy": (
            f'Acquire::http::Proxy "http://{BRIDGE_ADDRESS}:{PROXY_PORT}/";\n'
            'Acquire::http::Pipeline-Depth "0";\n'
            'Acquire::Check-Valid-Until "false";\n'
            'Acquire::Languages "none";\n'),
    }
    for rel, text in files.items():
        path = upper / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (upper / "root" / ".ssh").chmod(0o700)
    (upper / "root" / ".ssh" / "authorized_keys").chmod(0o600)


def host_up(host: Host, rootfs: Path, pubkey: str) -> None:
    upper, work = host.dir / "upper", host.dir / "work"
    if not mounted(host.root):
        fresh = not upper.exists()
        for d in (upper, work, host.root):
            d.mkdir(parents=True, exist_ok=True)
        if fresh:
            write_host_files(host, upper, pubkey)
        run("mount", "-t", "overlay", "overlay", "-o",
            f"lowerdir={rootfs},upperdir={upper},workdir={work}", str(host.root))
    for cg in host.cgroups():
        cg.mkdir(parents=True, exist_ok=True)
    if alive(host.pidfile):
        return
    logfile = STATE / "logs" / f"{host.short}.log"
    logfile.parent.mkdir(parents=True, exist_ok=True)
    host.pidfile.parent.mkdir(parents=True, exist_ok=True)
    nspawn = ["systemd-nspawn", "--boot", "--register=no", "--keep-unit",
              f"--directory={host.root}", f"--machine={host.name}", f"--uuid={host.uuid}",
              f"--network-namespace-path=/run/netns/{host.netns}",
              "--resolv-conf=off", "--timezone=off", "--link-journal=no",
              "--console=read-only"]
    argv = [sys.executable, str(HERE / "supervise.py"),
            *(f"--cgroup={cg}" for cg in host.cgroups()), "--", *nspawn]
    with open(logfile, "ab") as out:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                start_new_session=True)
    host.pidfile.write_text(f"{proc.pid}\n")
    log(f"{host.name}: booting ({host.address})")


def wait_ssh(hosts: tuple[Host, ...], key: Path) -> None:
    deadline = time.monotonic() + BOOT_TIMEOUT_S
    pending = list(hosts)
    while pending and time.monotonic() < deadline:
        for host in list(pending):
            probe = subprocess.run(
                ["ssh", "-i", str(key), "-o", "BatchMode=yes", "-o", "ConnectTimeout=3",
                 "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
                 "-o", "LogLevel=ERROR", f"root@{host.address}",
                 "systemctl is-system-running --wait >/dev/null; true"],
                stdin=subprocess.DEVNULL, capture_output=True, timeout=90)
            if probe.returncode == 0:
                pending.remove(host)
                log(f"{host.name}: up, ssh answers")
        if pending:
            time.sleep(1.0)
    if pending:
        names = ", ".join(h.name for h in pending)
        raise SystemExit(f"testbed: {names} did not answer ssh within {BOOT_TIMEOUT_S:.0f} s"
                         f" (see {STATE / 'logs'})")


# -- proxy ------------------------------------------------------------------------------

def proxy_up(mirror: aptsource.Mirror) -> None:
    pidfile = STATE / "run" / "proxy.pid"
    if alive(pidfile):
        return
    pidfile.parent.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, str(HERE / "proxy.py"), "--host", BRIDGE_ADDRESS,
            "--port", str(PROXY_PORT), *(f"--allow={h}" for h in mirror.hosts)]
    if mirror.upstream_proxy:
        argv.append(f"--upstream={mirror.upstream_proxy}")
    with open(STATE / "logs" / "proxy.log", "ab") as out:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                start_new_session=True)
    pidfile.write_text(f"{proc.pid}\n")
    log(f"apt proxy on {BRIDGE_ADDRESS}:{PROXY_PORT} for {', '.join(mirror.hosts)}")


# -- inventory --------------------------------------------------------------------------

# Host variables of the test bed's inventory. CPUs (each unit's CPUAffinity=): the broker
# on the second of its host's two CPUs, so the deploy test sees the pin in the process;
# the worker's and the appliance's lists name both CPUs (a duplicate too), which keeps
# the cores the tests' clusters rely on while the units carry the setting. The appliance
# keeps to CPU 0 for its first 5 s after ready (appliance_cpus_after_ready), short enough
# to be over before the tests that restart it measure anything; both instances of the
# pair alike, so whichever serves shows it.
_APPLIANCE_CPUS = {"appliance_cpus": "[0, 1]", "appliance_cpus_after_ready": "[0]",
                   "appliance_cpus_after_ready_seconds": "5"}
HOST_VARS: dict[str, dict[str, str]] = {
    "tb-master": _APPLIANCE_CPUS,
    "tb-worker1": {"kafka_broker_cpus": "[1]"},
    "tb-worker2": {"spark_worker_cpus": "[1, 0, 1]", **_APPLIANCE_CPUS},
}
# The pair's two Spark applications: each takes 4 cores in 2-core executors (one core per
# partition of events, twice). Each worker offers 8 (four per CPU: the standby's executors
# mostly wait), room for both applications whole: a lost worker's executors always find
# cores on the other. With fewer, the executors of an application that lost some pile
# onto the cores a dead partner freed, and the next worker lost takes all of them
# (measured: 0 slots for 30 s, the query failed).
PAIR_VARS = ("    appliance_spark_cores_max: 4", "    appliance_spark_executor_cores: 2",
             "    spark_worker_cores_per_cpu: 4")


def _connection_vars(key: Path) -> list[str]:
    return ["    ansible_user: root",
            f"    ansible_ssh_private_key_file: {key}",
            "    ansible_ssh_common_args: >-",
            "      -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null",
            "      -o ControlMaster=auto -o ControlPersist=120s",
            "    ansible_python_interpreter: /usr/bin/python3"]


def _write_private(path: Path, lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write("\n".join(lines) + "\n")
    tmp.replace(path)


def write_inventory(key: Path) -> None:
    site = [h for h in HOSTS if set(h.groups) & set(GROUPS)]
    lines = ["# Written by `make testbed` (scripts/testbed); do not edit, do not commit.",
             "all:", "  vars:", *_connection_vars(key),
             f"    spark_auth_secret: {json.dumps(spark_secret())}",
             f"    monitoring_web_password: {json.dumps(web_password())}",
             "    kafka_passwords:",
             *(f"      {user}: {json.dumps(pw)}" for user, pw in kafka_passwords().items()),
             "    kafka_broker_extra_acls:",
             "      - {principal: 'User:forwarder', topic: alerts, operations: [READ]}",
             "      - {principal: 'User:forwarder', group: alert-forwarder, operations: [READ]}",
             "    monitoring_loadgen_targets:",
             f"      - {BRIDGE_ADDRESS}:{LOADGEN_METRICS_PORT}",
             f"    monitoring_alert_webhook_url: http://{BRIDGE_ADDRESS}:{ALERT_WEBHOOK_PORT}/alerts",
             *PAIR_VARS,
             "  hosts:"]
    for host in site:
        lines += [f"    {host.name}:", f"      ansible_host: {host.address}",
                  f"      cluster_address: {host.address}",
                  *(f"      {k}: {v}" for k, v in HOST_VARS.get(host.name, {}).items())]
    lines.append("  children:")
    for group in GROUPS:
        lines += [f"    {group}:", "      hosts:"]
        lines += [f"        {h.name}:" for h in site if group in h.groups]
    _write_private(INVENTORY, lines)
    # The existing cluster's host, for its owner's own play (no site group, no secret).
    others = [h for h in HOSTS if h not in site]
    _write_private(EXISTING_KAFKA_INVENTORY, [
        "# Written by `make testbed` (scripts/testbed); do not edit, do not commit.",
        "all:", "  vars:", *_connection_vars(key), "  hosts:",
        *(line for h in others for line in (f"    {h.name}:", f"      ansible_host: {h.address}"))])


# -- up / down --------------------------------------------------------------------------

def check_tools() -> None:
    missing = [t for t in ("mmdebstrap", "systemd-nspawn", "ip", "ssh", "ssh-keygen")
               if shutil.which(t) is None]
    if missing:
        raise SystemExit(f"testbed: missing {', '.join(missing)}; run `make setup` as root "
                         "(scripts/system_deps.py installs them)")
    if os.geteuid() != 0:
        raise SystemExit("testbed: must run as root (namespaces, mounts, cgroups)")


def up() -> int:
    check_tools()
    started = time.monotonic()
    mirror = aptsource.detect()
    STATE.mkdir(parents=True, exist_ok=True)
    (STATE / "logs").mkdir(exist_ok=True)
    rootfs = build_rootfs(mirror)
    key = ssh_key()
    pubkey = Path(f"{key}.pub").read_text()
    bridge_up()
    proxy_up(mirror)
    for host in HOSTS:
        host_network_up(host)
        host_up(host, rootfs, pubkey)
    wait_ssh(HOSTS, key)
    write_inventory(key)
    log(f"up in {time.monotonic() - started:.1f} s; inventory {INVENTORY.relative_to(REPO)}")
    return 0


def _host(name: str) -> Host:
    found = [h for h in HOSTS if h.name == name]
    if not found:
        raise SystemExit(f"testbed: no host {name!r} (hosts: {', '.join(h.name for h in HOSTS)})")
    return found[0]


def partition(name: str) -> int:
    """Cut one host off the bridge, as a pulled cable or a dead switch port does: the
    bridge's end of its veth goes down, its own end loses its carrier, every packet to
    and from it is dropped (no reset: connections hang), and its processes run on,
    unheard. ``heal`` plugs it back in."""
    host = _host(name)
    run("ip", "link", "set", host.veth, "down")
    log(f"{host.name}: cut off the bridge ({host.veth} down)")
    return 0


def heal(name: str) -> int:
    """Undo ``partition``: the host's veth back up on the bridge."""
    host = _host(name)
    run("ip", "link", "set", host.veth, "master", BRIDGE, "up")
    log(f"{host.name}: back on the bridge ({host.veth} up)")
    return 0


def kill_tree(pidfile: Path, timeout: float) -> None:
    pid = alive(pidfile)
    if pid is not None:
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and alive(pidfile):
            time.sleep(0.2)
        if alive(pidfile):
            os.kill(pid, signal.SIGKILL)
    pidfile.unlink(missing_ok=True)


def cgroup_pids(path: Path) -> list[int]:
    pids: list[int] = []
    for procs in path.rglob("cgroup.procs"):
        try:
            pids += [int(p) for p in procs.read_text().split()]
        except OSError:
            pass
    return pids


def remove_cgroup(path: Path) -> None:
    if not path.exists():
        return
    for _ in range(50):  # bounded: processes may take a moment to leave after SIGKILL
        for pid in cgroup_pids(path):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        for sub in sorted((p for p in path.rglob("*") if p.is_dir()),
                          key=lambda p: len(p.parts), reverse=True):
            try:
                sub.rmdir()
            except OSError:
                pass
        try:
            path.rmdir()
            return
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"testbed: cannot remove cgroup {path} (processes left: "
                     f"{cgroup_pids(path)})")


def down() -> int:
    started = time.monotonic()
    for host in HOSTS:
        if alive(host.pidfile):
            log(f"{host.name}: powering off")
        kill_tree(host.pidfile, STOP_TIMEOUT_S)
    for host in HOSTS:
        for cg in host.cgroups():
            remove_cgroup(cg)
        if mounted(host.root):
            run("umount", str(host.root))
        if host.dir.exists():
            shutil.rmtree(host.dir)
        if exists("ip", "link", "show", host.veth):
            run("ip", "link", "del", host.veth)
        if Path(f"/run/netns/{host.netns}").exists():
            run("ip", "netns", "del", host.netns)
    for root in CGROUP_ROOTS:
        remove_cgroup(root / CGROUP_NAME)
    kill_tree(STATE / "run" / "proxy.pid", 5.0)
    prune_rootfs(aptsource.detect())
    if exists("ip", "link", "show", BRIDGE):
        run("ip", "link", "del", BRIDGE)
    INVENTORY.unlink(missing_ok=True)
    EXISTING_KAFKA_INVENTORY.unlink(missing_ok=True)
    log(f"down in {time.monotonic() - started:.1f} s")
    return 0
