"""The connection caps: per client IP (Kafka's ``max.connections.per.ip``), one address may
hold at most ``limit`` connections at once; and for the whole broker (Kafka's
``max.connections``), at most ``total_limit``, above the per-IP cap, so one address at its
cap leaves room for others. A connection over either is closed as soon as it is accepted,
before any TLS handshake or SASL exchange costs the broker anything. The broker's own
total is also kept below the process's open-files limit (``effective_total``), so an
accept never fails for want of a descriptor while segment files need one.

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


FD_RESERVE = 1024  # descriptors kept for segment files, the metrics endpoint, workers


def effective_total(limit: int, open_files: int) -> int:
    """The broker-wide cap in force: ``limit`` (0: none) below the open-files limit less
    ``FD_RESERVE``."""
    room = max(open_files - FD_RESERVE, 16)
    return min(limit, room) if limit else room


class ConnectionCap:
    """Open connections, per client IP and in all; ``admit`` on accept, ``release`` on
    close."""

    def __init__(self, limit: int, total_limit: int = 0) -> None:
        self.limit = limit  # per IP; 0: no cap
        self.total_limit = total_limit  # all addresses; 0: no cap
        self.open: dict[str, int] = {}
        self.total = 0
        self.refused = 0  # since start, all addresses (per-IP cap)
        self.refused_total = 0  # since start (the broker-wide cap)
        self._log = RefusalLog("broker.connection_refused", limit=limit,
                               setting="--max-connections-per-ip")
        self._total_log = RefusalLog("broker.connection_refused", limit=total_limit,
                                     setting="--max-connections")

    def admit(self, ip: str) -> bool:
        n = self.open.get(ip, 0)
        if self.limit and n >= self.limit:
            self.refused += 1
            self._log.refused(ip, time.monotonic(), open_connections=n)
            return False
        if self.total_limit and self.total >= self.total_limit:
            self.refused_total += 1
            self._total_log.refused("*", time.monotonic(), open_connections=self.total)
            return False
        self.open[ip] = n + 1
        self.total += 1
        return True

    def release(self, ip: str) -> None:
        self.total = max(self.total - 1, 0)
        if self.total < self.total_limit:
            self._total_log.forget("*")
        n = self.open.get(ip, 0) - 1
        if n > 0:
            self.open[ip] = n
        else:
            self.open.pop(ip, None)
            self._log.forget(ip)
