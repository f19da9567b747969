"""The per-IP connection cap (Kafka's ``max.connections.per.ip``): one client address may
hold at most ``limit`` connections at once; the next is closed as soon as it is accepted,
before any TLS handshake or SASL exchange costs the broker anything.

A refused client usually retries at once, so refusals are logged once per address and
then at most every ``LOG_EVERY_S`` with the count since (``broker.connection_refused``),
and counted for ``broker_connections_refused``. ``RefusalLog`` does that for the
creation rate's throttled connections too (``rate``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from appliance.logs import get_logger

log = get_logger("appliance.broker")
LOG_EVERY_S = 10.0


@dataclass
class _Refusals:
    logged_at: float
    since_log: int = 0


class RefusalLog:
    """One log line per address at its first refusal, then at most every ``LOG_EVERY_S``
    with the count since; ``forget`` when the address is back under its limit."""

    def __init__(self, event: str, limit: float, setting: str) -> None:
        self.event, self.limit, self.setting = event, limit, setting
        self._seen: dict[str, _Refusals] = {}  # only addresses at their limit

    def refused(self, ip: str, now: float, **fields: object) -> None:
        seen = self._seen.get(ip)
        if seen is None:
            seen = self._seen[ip] = _Refusals(logged_at=now - LOG_EVERY_S)
        seen.since_log += 1
        if now - seen.logged_at >= LOG_EVERY_S:
            log.warning(self.event, ip=ip, **fields, limit=self.limit,
                        refused_since_last_log=seen.since_log, setting=self.setting)
            seen.logged_at, seen.since_log = now, 0

    def forget(self, ip: str) -> None:
        self._seen.pop(ip, None)


class ConnectionCap:
    """Open connections per client IP; ``admit`` on accept, ``release`` on close."""

    def __init__(self, limit: int) -> None:
        self.limit = limit  # 0: no cap
        self.open: dict[str, int] = {}
        self.refused = 0  # since start, all addresses
        self._log = RefusalLog("broker.connection_refused", limit=limit,
                               setting="--max-connections-per-ip")

    def admit(self, ip: str) -> bool:
        n = self.open.get(ip, 0)
        if self.limit and n >= self.limit:
            self.refused += 1
            self._log.refused(ip, time.monotonic(), open_connections=n)
            return False
        self.open[ip] = n + 1
        return True

    def release(self, ip: str) -> None:
        n = self.open.get(ip, 0) - 1
        if n > 0:
            self.open[ip] = n
        else:
            self.open.pop(ip, None)
            self._log.forget(ip)
