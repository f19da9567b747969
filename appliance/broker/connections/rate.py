"""The per-IP connection creation rate (Kafka's ``connection_creation_rate`` quota for
IPs, KIP-612): one client address may open at most ``per_second`` new connections a
second, with a burst of one second's worth.

Why, beside the cap on open connections: a client that logs in and closes over and over
never holds many connections, yet each login costs the broker's event loop its accept,
the TLS handshake and the SASL exchange (for PLAIN a password check too). At a thousand
logins a second that work alone tripled the produce latency of clients already logged
in (``bench/login_flood.py``, docs/broker.md). Rate-limited, a flood from one address
costs the loop an accept a second per connection it holds open.

A connection over the rate is accepted and held without reading a byte (no TLS, no
SASL), then closed after ``THROTTLED_CLOSE_S``, as Kafka delays closing a throttled
connection: a client that reconnects at once is slowed to one attempt per held
connection per ``THROTTLED_CLOSE_S``, not let spin on accept and close. Connections over
the rate take no token, so a throttled client still gets the rate it is allowed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from appliance.broker.connections.cap import RefusalLog

THROTTLED_CLOSE_S = 1.0
# Buckets that have refilled are forgotten every PRUNE_EVERY takes (a full bucket and
# a missing one mean the same), so the table holds only addresses seen in the last second.
PRUNE_EVERY = 1024


@dataclass(slots=True)
class _Bucket:
    tokens: float
    at: float


class ConnectionRate:
    """Token buckets by client IP; ``take`` on each accepted connection."""

    def __init__(self, per_second: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.per_second = per_second  # 0: no limit
        self.burst = max(per_second, 1.0)
        self.throttled = 0  # since start, all addresses
        self._clock = clock
        self._buckets: dict[str, _Bucket] = {}
        self._takes = 0
        self._log = RefusalLog("broker.connection_throttled", limit=per_second,
                               setting="--max-connection-creation-rate-per-ip")

    def take(self, ip: str) -> bool:
        """True if a new connection from ``ip`` is within its rate (and counts against it);
        False: hold it unread and close it after ``THROTTLED_CLOSE_S``."""
        if not self.per_second:
            return True
        now = self._clock()
        self._takes += 1
        if self._takes % PRUNE_EVERY == 0:
            self._prune(now)
        bucket = self._buckets.get(ip)
        if bucket is None:
            bucket = self._buckets[ip] = _Bucket(tokens=self.burst, at=now)
        else:
            bucket.tokens = min(self.burst, bucket.tokens + (now - bucket.at) * self.per_second)
            bucket.at = now
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            return True
        self.throttled += 1
        self._log.refused(ip, now)
        return False

    def _prune(self, now: float) -> None:
        full_after = self.burst / self.per_second
        for ip in [ip for ip, b in self._buckets.items() if now - b.at >= full_after]:
            del self._buckets[ip]
            self._log.forget(ip)

    def tracked(self) -> int:
        """Addresses with a bucket now (bounded by the addresses seen in the last second)."""
        return len(self._buckets)
