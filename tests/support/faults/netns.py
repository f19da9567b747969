"""A network namespace joined to this host by a veth pair, so that a fault test can cut or
throttle the one link between the appliance and a broker that runs inside it.

The broker runs as ``ip netns exec NAME ...`` (``EmbeddedBroker(launcher=...)``) and
listens on the namespace's address; every client (appliance, load, reader) reaches it over
the veth pair, whose host end is the link the nemesis takes down (a partition) or shapes
with a ``tbf`` qdisc (a throttle). No iptables: ``ip`` and ``tc`` only. Set-up and
tear-down are bounded in time, and tear-down runs whatever set-up got through (it is
called from ``finally`` blocks).

netem (delay, loss) needs the ``sch_netem`` module, which some kernels lack:
``netem_available()`` asks the kernel instead of assuming.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass

COMMAND_TIMEOUT_S = 10.0


class NetnsError(RuntimeError):
    """An ``ip``/``tc`` command failed or hung; the message names it and its stderr."""


def run(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True,
                              timeout=COMMAND_TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        raise NetnsError(f"{' '.join(argv)}: no answer in {COMMAND_TIMEOUT_S:g} s") from exc
    if check and done.returncode != 0:
        raise NetnsError(f"{' '.join(argv)}: exit {done.returncode}: {done.stderr.strip()}")
    return done


def supported() -> str | None:
    """None when this process may build a namespace, else why not (for a skip)."""
    if os.geteuid() != 0:
        return "network namespaces need root (CI runs as root)"
    for tool in ("ip", "tc"):
        if run("sh", "-c", f"command -v {tool}", check=False).returncode != 0:
            return f"no {tool} command"
    return None


@dataclass(frozen=True)
class Netns:
    """Namespace ``name``; ``host_if`` (``host_ip``) here, ``inner_if`` (``inner_ip``) in it."""

    name: str
    host_if: str
    inner_if: str
    host_ip: str
    inner_ip: str

    @property
    def launcher(self) -> list[str]:
        """argv prefix that runs a command inside the namespace (exec, no fork)."""
        return ["ip", "netns", "exec", self.name]

    def partition(self) -> None:
        """Take the link down: every packet between host and namespace is dropped."""
        run("ip", "link", "set", self.host_if, "down")

    def heal_partition(self) -> None:
        run("ip", "link", "set", self.host_if, "up")

    def throttle(self, rate: str = "256kbit", burst: str = "16kb",
                 latency: str = "200ms") -> None:
        """A token bucket on both ends: at most ``rate`` each way, the rest queued or
        dropped (TCP retransmits it)."""
        for prefix in ([], ["ip", "netns", "exec", self.name]):
            dev = self.inner_if if prefix else self.host_if
            run(*prefix, "tc", "qdisc", "replace", "dev", dev, "root", "tbf", "rate", rate,
                "burst", burst, "latency", latency)

    def unthrottle(self) -> None:
        for prefix in ([], ["ip", "netns", "exec", self.name]):
            dev = self.inner_if if prefix else self.host_if
            run(*prefix, "tc", "qdisc", "del", "dev", dev, "root", check=False)


def netns_names(tag: str) -> tuple[str, str, str]:
    """Namespace and interface names (interface names: at most 15 characters)."""
    return f"nemesis-{tag}", f"nm{tag}h", f"nm{tag}n"


def create(tag: str | None = None) -> Netns:
    """A fresh namespace on a random /30 of 10.231.0.0/16 (not the test bed's 10.213/24);
    on failure what was made is removed again."""
    tag = tag or secrets.token_hex(3)
    name, host_if, inner_if = netns_names(tag)
    third, fourth = secrets.randbelow(256), secrets.randbelow(64) * 4
    ns = Netns(name, host_if, inner_if, f"10.231.{third}.{fourth + 1}",
               f"10.231.{third}.{fourth + 2}")
    try:
        run("ip", "netns", "add", name)
        run("ip", "link", "add", host_if, "type", "veth", "peer", "name", inner_if)
        run("ip", "link", "set", inner_if, "netns", name)
        run("ip", "addr", "add", f"{ns.host_ip}/30", "dev", host_if)
        run("ip", "link", "set", host_if, "up")
        inside = ns.launcher
        run(*inside, "ip", "addr", "add", f"{ns.inner_ip}/30", "dev", inner_if)
        run(*inside, "ip", "link", "set", inner_if, "up")
        run(*inside, "ip", "link", "set", "lo", "up")
    except BaseException:
        destroy(ns)
        raise
    return ns


def destroy(ns: Netns) -> None:
    """Remove the veth pair and the namespace; each step tolerates an absent object."""
    run("ip", "link", "del", ns.host_if, check=False)  # takes its peer with it
    run("ip", "netns", "del", ns.name, check=False)


@contextlib.contextmanager
def namespace() -> Iterator[Netns]:
    ns = create()
    try:
        yield ns
    finally:
        destroy(ns)


def netem_available() -> bool:
    """Whether this kernel has the netem qdisc (tried on a throwaway dummy link)."""
    dev = f"nmprobe{secrets.token_hex(2)}"
    if run("ip", "link", "add", dev, "type", "dummy", check=False).returncode != 0:
        return False
    try:
        return run("tc", "qdisc", "add", "dev", dev, "root", "netem", "delay", "1ms",
                   check=False).returncode == 0
    finally:
        run("ip", "link", "del", dev, check=False)
