"""``appliance rules reload``: ask the running appliance to re-read its rules, wait for the
outcome, and exit 0 (applied or unchanged), 2 (rejected) or 1 (failed or unreachable).

The appliance is found where Prometheus finds it, on the metrics endpoint of the same
config file (``[metrics] host``/``port``): its ``/-/rules`` page gives its pid and the
last reload's outcome. The request itself is a SIGHUP, as for Prometheus and nginx, so
only the appliance's own user or root can make it; then the client waits on the same page
for the outcome of a reload that started after its signal. Under systemd, ``ExecReload=``
runs this command, so ``systemctl reload appliance`` fails visibly when the new rules are
rejected.
"""

from __future__ import annotations

import json
import os
import signal
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

from appliance.config import Config
from appliance.process.reload_status import STATUS_PATH, ReloadResult

DEFAULT_TIMEOUT_S = 180.0
POLL_S = 0.1
#: Addresses a server listens on that a client cannot connect to as such.
_ANY = ("0.0.0.0", "::", "")


class ReloadClientError(Exception):
    """The running appliance could not be asked or did not answer (one line, exit 1)."""


@dataclass(frozen=True)
class Answer:
    result: ReloadResult
    line: str  # the one line to print

    @property
    def exit_code(self) -> int:
        return self.result.exit_code


def status_url(config: Config, path: str = STATUS_PATH) -> str:
    """The running appliance's status page (or another of its pages, ``path``), from the
    config it runs with."""
    host, port = config.metrics.host, config.metrics.port
    if port == 0:
        raise ReloadClientError("metrics.port is 0 (a random port): pass --url "
                                f"http://HOST:PORT{path} from the appliance's log")
    host = "127.0.0.1" if host in _ANY else host
    host = f"[{host}]" if ":" in host else host
    return f"http://{host}:{port}{path}"


def read_page(url: str) -> dict[str, Any]:
    """One of the running appliance's JSON pages; ReloadClientError if none answers."""
    return _status(url)


def _status(url: str) -> dict[str, Any]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return json.loads(response.read().decode("utf-8"))
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ReloadClientError(f"{url}: no running appliance answers ({reason})") from None


def _line(outcome: dict[str, Any]) -> str:
    source, result = outcome["source"], outcome["result"]
    if result == ReloadResult.APPLIED.value:
        start = outcome.get("effective_from")
        when = ("runs from the next epoch or batch (none has run since)"
                if not outcome.get("in_effect") else
                "runs" if start is None else f"runs from epoch or batch {start}")
        return (f"{source}: applied, rules version {outcome['version']} (was "
                f"{outcome['previous_version']}) {when}; alerting waited "
                f"{outcome['swap_s']:.3f} s")
    if result == ReloadResult.UNCHANGED.value:
        return f"{source}: unchanged, rules version {outcome['version']} keeps running"
    if result == ReloadResult.REJECTED.value:
        more = len(outcome["problems"]) - 1
        extra = f" (and {more} more problem{'s' * (more > 1)})" if more > 0 else ""
        return f"{outcome['error']}{extra}; rules version {outcome['version']} keeps running"
    return f"{source}: reload failed: {outcome['error']}; running rules version " \
           f"{outcome['version']}"


def reload(url: str, pid: int | None = None, timeout_s: float = DEFAULT_TIMEOUT_S) -> Answer:
    """Signal the appliance behind ``url`` and wait for its next reload outcome."""
    before = _status(url)
    target = int(before["pid"])
    if pid is not None and pid != target:
        raise ReloadClientError(f"{url} is served by pid {target}, not {pid}: another "
                                "appliance answers on that port")
    sent_at = time.time()
    try:
        os.kill(target, signal.SIGHUP)
    except ProcessLookupError:
        raise ReloadClientError(f"pid {target} ({url}) is gone") from None
    except PermissionError:
        raise ReloadClientError(f"not allowed to signal pid {target}: run as the "
                                "appliance's user or root") from None
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        time.sleep(POLL_S)
        now = _status(url)
        if int(now["pid"]) != target:
            raise ReloadClientError(f"the appliance restarted (pid {target} -> {now['pid']}) "
                                    "before it answered")
        outcome = now["last_reload"]
        if outcome is not None and outcome["started_at"] >= sent_at:
            return Answer(ReloadResult(outcome["result"]), _line(outcome))
    raise ReloadClientError(f"no reload outcome from pid {target} within {timeout_s:.0f} s "
                            "(it may still be swapping: see its log)")
