"""``appliance watch`` (``make watch``): Prometheus and Alertmanager on this machine,
with the project's scrape config and recording and alert rules, against a running
``appliance run``, and the broker, load generator and Spark when asked for or found
running (``dashboards.watch_targets``: a job with nothing running is not scraped, so the
quick start shows no alert while all is well).

The servers are the installed Debian packages (``prometheus``,
``prometheus-alertmanager``; ``make setup`` installs them): nothing is downloaded.
Both listen on 127.0.0.1 only, Alertmanager with its cluster port off (it would listen on
every interface), and keep their data in ``var/watch/`` beside their generated configs and
logs. The scrape config is dashboards/prometheus/prometheus.yml with each job's targets
in a file the watch writes (``file_sd_configs``), a shorter interval (a local run is
short, and the dashboards' panels want points), the rules file
dashboards/prometheus/rules.yml as it ships, and Alertmanager added.

Ctrl-C (or SIGTERM) stops both and exits 0, as ``appliance run`` does: it is how this is
stopped. Whatever else ends the watch (``kill -9``, the OOM killer), both servers get
SIGTERM from the kernel (``dashboards.parent_death``). Exit 1 when a server does not come
up or dies on its own (its log's last lines are printed), 2 when it cannot start at all
(not installed, a port taken, a bad flag).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import yaml

from appliance.command_tree import EXIT_FAILURE, EXIT_OK, EXIT_USAGE
from dashboards.parent_death import die_with
from dashboards.watch_components import BY_NAME, COMPONENTS
from dashboards.watch_targets import Discovery, TargetFiles

PROMETHEUS_DIR = Path(__file__).resolve().parent / "prometheus"
SCRAPE_CONFIG = PROMETHEUS_DIR / "prometheus.yml"
RULES = PROMETHEUS_DIR / "rules.yml"
HOST = "127.0.0.1"
READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 20.0
READY_PREFIX = "watch ready: "
DISCOVER_EVERY_S = 5.0


class WatchError(Exception):
    """Why the stack cannot run; ``code`` is the exit code (2 before start, 1 after)."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Server:
    """One of the two servers: its Debian package, binary and port."""

    name: str
    package: str
    binary: str
    port: int

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"


@dataclass(frozen=True)
class WatchSettings:
    """What ``appliance watch``'s flags chose."""

    data_dir: Path
    prometheus_port: int
    alertmanager_port: int
    # component (dashboards.watch_components) -> host:port: scraped from the start (the
    # appliance always), and looked for, scraped once found.
    targets: dict[str, str]
    scrape_interval_s: float
    retention: str
    look_for: dict[str, str] | None = None

    @property
    def target_files(self) -> TargetFiles:
        return TargetFiles(self.data_dir / "targets")

    @property
    def prometheus(self) -> Server:
        return Server("Prometheus", "prometheus", "prometheus", self.prometheus_port)

    @property
    def alertmanager(self) -> Server:
        return Server("Alertmanager", "prometheus-alertmanager", "prometheus-alertmanager",
                      self.alertmanager_port)


def _interval(seconds: float) -> str:
    return f"{int(seconds * 1000)}ms"


def prometheus_config(settings: WatchSettings) -> dict:
    """The project's scrape config, pointed at this machine's targets and Alertmanager."""
    config = yaml.safe_load(SCRAPE_CONFIG.read_text(encoding="utf-8"))
    interval = _interval(settings.scrape_interval_s)
    config["global"] = {**config.get("global", {}), "scrape_interval": interval,
                        "evaluation_interval": interval}
    config["rule_files"] = [str(RULES)]
    config["alerting"] = {"alertmanagers": [
        {"static_configs": [{"targets": [f"{HOST}:{settings.alertmanager_port}"]}]}]}
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    known = {job for component in COMPONENTS for job in component.jobs}
    if set(jobs) != known:
        raise WatchError(f"{SCRAPE_CONFIG}: jobs {sorted(set(jobs) ^ known)} differ from "
                         f"dashboards/watch_components.py's (the scrape config changed; update "
                         f"COMPONENTS)", EXIT_USAGE)
    files = settings.target_files
    for name, job in jobs.items():
        job.pop("static_configs", None)
        # Absolute: Prometheus reads a relative file_sd path from the config file's folder
        # (the default --data-dir var/watch would be looked for in var/watch/var/watch).
        job["file_sd_configs"] = [{"files": [str(files.path(name).resolve())],
                                   "refresh_interval": interval}]
    return config


def alertmanager_config() -> dict:
    """Alerts grouped per alert and job, kept in Alertmanager (no notifications: a local
    watch has nobody to page); its UI and API show them."""
    return {"route": {"receiver": "local", "group_by": ["alertname", "job"],
                      "group_wait": "10s", "group_interval": "1m", "repeat_interval": "4h"},
            "receivers": [{"name": "local"}]}


def _port_free(port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((HOST, port))
        except OSError:
            return False
    return True


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as answer:
            return answer.status == 200
    except (urllib.error.URLError, OSError):
        return False


def _tail(log: Path, lines: int = 5) -> str:
    try:
        text = log.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(f"  {line}" for line in text[-lines:])


class Stack:
    """The two servers as child processes, each in its own process group (Ctrl-C at the
    terminal reaches this process, which stops them in order)."""

    def __init__(self, settings: WatchSettings) -> None:
        self.settings = settings
        self.procs: dict[str, tuple[subprocess.Popen, Path]] = {}

    def _commands(self) -> list[tuple[Server, list[str]]]:
        s, data = self.settings, self.settings.data_dir
        return [
            (s.alertmanager, [
                "--config.file", str(data / "alertmanager.yml"),
                "--storage.path", str(data / "alertmanager"),
                "--web.listen-address", f"{HOST}:{s.alertmanager_port}",
                "--cluster.listen-address", ""]),
            (s.prometheus, [
                "--config.file", str(data / "prometheus.yml"),
                "--storage.tsdb.path", str(data / "prometheus"),
                "--storage.tsdb.retention.time", s.retention,
                "--web.listen-address", f"{HOST}:{s.prometheus_port}"]),
        ]

    def check(self) -> None:
        """Usage problems, before anything starts (WatchError, exit 2)."""
        for server, _ in self._commands():
            if shutil.which(server.binary) is None:
                raise WatchError(f"{server.binary} not found: apt-get install {server.package} "
                                 f"(make setup installs it)", EXIT_USAGE)
            if not _port_free(server.port):
                flag = f"--{server.name.lower()}-port"
                raise WatchError(f"{flag} {server.port}: {HOST}:{server.port} is already in "
                                 f"use (another watch, or a {server.name}?); name a free one "
                                 f"with {flag}", EXIT_USAGE)

    def write_configs(self) -> None:
        data = self.settings.data_dir
        data.mkdir(parents=True, exist_ok=True)
        files = self.settings.target_files
        files.clear()
        for name, address in self.settings.targets.items():
            files.scrape(BY_NAME[name], address)
        (data / "prometheus.yml").write_text(
            yaml.safe_dump(prometheus_config(self.settings), sort_keys=False), encoding="utf-8")
        (data / "alertmanager.yml").write_text(
            yaml.safe_dump(alertmanager_config(), sort_keys=False), encoding="utf-8")

    def start(self) -> None:
        for server, args in self._commands():
            log = self.settings.data_dir / f"{server.binary}.log"
            with log.open("ab") as out:
                proc = subprocess.Popen([shutil.which(server.binary) or server.binary, *args],
                                        stdout=out, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL, start_new_session=True,
                                        preexec_fn=die_with(os.getpid()))
            self.procs[server.name] = (proc, log)

    def wait_ready(self, stop: threading.Event, timeout_s: float = READY_TIMEOUT_S) -> bool:
        """True when both answer /-/ready; False if stopped first; WatchError (exit 1) if
        one exits or the time runs out."""
        deadline = time.monotonic() + timeout_s
        servers = [server for server, _ in self._commands()]
        waiting = list(servers)
        while waiting:
            if stop.is_set():
                return False
            self.check_running()
            waiting = [server for server in waiting if not _ready(server.url)]
            if waiting and time.monotonic() > deadline:
                names = ", ".join(server.name for server in waiting)
                raise WatchError(f"{names} not ready after {timeout_s:g} s (logs in "
                                 f"{self.settings.data_dir})", EXIT_FAILURE)
            if waiting:
                stop.wait(0.2)
        return True

    def check_running(self) -> None:
        for name, (proc, log) in self.procs.items():
            if proc.poll() is not None:
                raise WatchError(f"{name} exited with {proc.returncode}; its log {log} "
                                 f"ends:\n{_tail(log)}", EXIT_FAILURE)

    def stop(self) -> None:
        """SIGTERM to each (both flush their data), SIGKILL after STOP_TIMEOUT_S."""
        for proc, _ in reversed(list(self.procs.values())):
            if proc.poll() is None:
                proc.terminate()
        for proc, _ in self.procs.values():
            try:
                proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=STOP_TIMEOUT_S)


def _print(line: str, error: bool = False) -> None:
    print(line, file=sys.stderr if error else sys.stdout, flush=True)


def run_watch(settings: WatchSettings, say=_print) -> int:
    """Start, report the URLs, serve until SIGINT/SIGTERM; the exit code."""
    stack = Stack(settings)
    try:
        stack.check()
        stack.write_configs()
    except WatchError as exc:
        say(f"appliance watch: {exc}", error=True)
        return exc.code
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set())
                for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        stack.start()
        if not stack.wait_ready(stop):
            return EXIT_OK
        p, a = settings.prometheus, settings.alertmanager
        say(f"{READY_PREFIX}Prometheus {p.url}, Alertmanager {a.url} (data in "
            f"{settings.data_dir}; Ctrl-C stops them)")
        scraped = ", ".join(f"{name} {target}" for name, target in settings.targets.items())
        looking = settings.look_for or {}
        sought = (f"; looking for {', '.join(f'{n} {t}' for n, t in looking.items())} (scraped "
                  f"once found)" if looking else "")
        say(f"watch: scraping {scraped} every {settings.scrape_interval_s:g} s with the "
            f"rules of {RULES.name}{sought}; targets {p.url}/targets, alerts {a.url}")
        discovery = Discovery(looking, settings.target_files)
        next_look = 0.0
        while not stop.wait(0.5):
            stack.check_running()
            if discovery.waiting and time.monotonic() >= next_look:
                for component, address in discovery.poll():
                    say(f"watch: found {component.name} at {address}: scraping it from now "
                        f"on")
                next_look = time.monotonic() + DISCOVER_EVERY_S
        return EXIT_OK
    except WatchError as exc:
        say(f"appliance watch: {exc}", error=True)
        return exc.code
    finally:
        stack.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        say(f"watch: stopped {settings.prometheus.name} and {settings.alertmanager.name}")
