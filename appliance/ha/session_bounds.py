"""Whether the Kafka cluster takes the pair's session timeout, and the one line when not.

A short ``[ha] session_timeout`` is most of a fast takeover after a kill -9 or a freeze,
but a Kafka broker accepts only sessions within its ``group.min.session.timeout.ms`` and
``group.max.session.timeout.ms`` (6 s and 30 min by default; the appliance's embedded
broker starts with a 1 s minimum). A session outside them is refused at every JoinGroup
(INVALID_SESSION_TIMEOUT): retrying cannot help, so the instance exits 2 with one line
naming the cluster's bounds and the key to change. The bounds are read once before Spark
starts (DescribeConfigs of a broker: a typo costs a second, not a JVM start); a cluster
that does not let the appliance's principal describe its configs is caught at the join
instead, by the same line without the figures it could not read.
"""

from __future__ import annotations

from dataclasses import dataclass

from kafka import KafkaAdminClient
from kafka.admin import ConfigResource, ConfigResourceType

from appliance.config import ConfigError

MIN_KEY = "group.min.session.timeout.ms"
MAX_KEY = "group.max.session.timeout.ms"


class SessionRefused(ConfigError):
    """The cluster will not take ``[ha] session_timeout``; ``str()`` is the one line the
    CLI prints before exiting 2."""


@dataclass(frozen=True)
class SessionBounds:
    """The sessions a broker accepts, ms (None: not said)."""

    min_ms: int | None
    max_ms: int | None

    def accepts(self, session_ms: int) -> bool:
        return ((self.min_ms is None or session_ms >= self.min_ms)
                and (self.max_ms is None or session_ms <= self.max_ms))


def cluster_bounds(client_config: dict, timeout_ms: int = 10_000) -> SessionBounds | None:
    """The bounds one broker of the cluster reports, None if it would not say (no
    DescribeConfigs permission, an old broker, Kafka unreachable: the join decides)."""
    try:
        admin = KafkaAdminClient(**{**client_config, "request_timeout_ms": timeout_ms})
    except Exception:  # noqa: BLE001 - unknown, not refused
        return None
    try:
        brokers = admin.describe_cluster().get("brokers") or []
        if not brokers:
            return None
        name = str(brokers[0]["broker_id"])
        found = admin.describe_configs(
            [ConfigResource(ConfigResourceType.BROKER, name, {MIN_KEY: None, MAX_KEY: None})],
            config_filter="all")
        entries = found.get("broker", {}).get(name, {})
        return SessionBounds(_ms(entries.get(MIN_KEY)), _ms(entries.get(MAX_KEY)))
    except Exception:  # noqa: BLE001 - unknown, not refused
        return None
    finally:
        admin.close()


def _ms(entry: dict | None) -> int | None:
    try:
        return int(entry["value"]) if entry else None
    except (KeyError, TypeError, ValueError):
        return None


def refusal(session_ms: int, bounds: SessionBounds | None) -> str:
    """The one line: what the cluster accepts, which key to change."""
    if bounds is not None and bounds.min_ms is not None and session_ms < bounds.min_ms:
        accepts = (f"accepts sessions of at least {_seconds(bounds.min_ms)} "
                   f"({MIN_KEY}={bounds.min_ms})")
        fix = f"to {_seconds(bounds.min_ms)} or more, or lower the cluster's {MIN_KEY}"
    elif bounds is not None and bounds.max_ms is not None and session_ms > bounds.max_ms:
        accepts = (f"accepts sessions of at most {_seconds(bounds.max_ms)} "
                   f"({MAX_KEY}={bounds.max_ms})")
        fix = f"to {_seconds(bounds.max_ms)} or less"
    else:
        accepts = (f"refused it (INVALID_SESSION_TIMEOUT: outside its {MIN_KEY} .. "
                   f"{MAX_KEY}, 6 s .. 30 min unless changed)")
        fix = "within the cluster's bounds"
    return (f"ha.session_timeout: {_seconds(session_ms)} is not a session this Kafka "
            f"cluster takes: it {accepts}; set [ha] session_timeout (or "
            f"APPLIANCE_HA_SESSION_TIMEOUT) {fix}")


def check_session(session_ms: int, client_config: dict) -> None:
    """``SessionRefused`` if the cluster says it would refuse ``session_ms``."""
    bounds = cluster_bounds(client_config)
    if bounds is not None and not bounds.accepts(session_ms):
        raise SessionRefused(refusal(session_ms, bounds))


def _seconds(ms: int) -> str:
    return f"{ms / 1000:g} s"
