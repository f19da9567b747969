"""What a load run is asked to do, validated before anything touches the network."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

from appliance.client_security import ClientSecurity
from appliance.topic_defaults import DEFAULT_TOPICS
from loadgen.schedule import Schedule

# The appliance's topic names are the defaults: one source of truth (a leaf, so that
# `loadgen --help` does not import the appliance's config model).
APPLIANCE_TOPICS = DEFAULT_TOPICS


class ConfigError(ValueError):
    """Bad run settings: the message names the setting (CLI exit code 2)."""


@dataclass
class LoadConfig:
    bootstrap: str
    rate: float
    duration: float
    ramp: float = 0.0
    alert_ratio: float = 0.1  # share of events that match an example rule (split evenly)
    bad_ratio: float = 0.0  # share of malformed events (split evenly over the bad kinds)
    events_topic: str = APPLIANCE_TOPICS.events
    alerts_topic: str = APPLIANCE_TOPICS.alerts
    dlq_topic: str = APPLIANCE_TOPICS.dead_letters
    workers: int = 1
    grace: float = 10.0  # seconds to wait for late answers after the last send
    metrics_port: int = 0  # 0: no Prometheus endpoint
    # Address of the Prometheus endpoint: loopback unless a Prometheus elsewhere scrapes it
    # (the deployed one, from the controller's cluster address).
    metrics_host: str = "127.0.0.1"
    behind_ms: float = 100.0  # an event sent later than this after its time counts as late
    drain_s: float = 1.0  # how long after the schedule's end a behind producer keeps sending
    retry_s: float = 120.0  # how long after the schedule unacknowledged events are re-sent
    floor_seconds: float = 0.0  # >0: measure the floor first, for this long, at `floor_rate`
    floor_rate: float | None = None  # default: the run's rate
    floor_ms: float | None = None  # a floor (p99, ms) measured elsewhere; skips measuring
    floor_topic: str = "loadgen.floor"
    topic_partitions: int = 2  # when loadgen has to create a topic
    linger_ms: float = 0.0
    progress: bool = True
    run_id: str = field(default_factory=lambda: "lg" + os.urandom(4).hex())
    security: ClientSecurity = field(default_factory=ClientSecurity)  # TLS/SASL, repr hides

    def validate(self) -> None:
        _require(bool(self.bootstrap), "bootstrap", "is required")
        for name in ("rate", "duration"):
            value = getattr(self, name)
            _require(isinstance(value, (int, float)) and math.isfinite(value) and value > 0,
                     name, "must be a positive number")
        _require(0 <= self.ramp <= self.duration, "ramp", "must be between 0 and --duration")
        for name in ("alert_ratio", "bad_ratio"):
            _require(0 <= getattr(self, name) <= 1, name, "must be within [0, 1]")
        _require(self.alert_ratio + self.bad_ratio <= 1, "alert_ratio",
                 "plus --bad-ratio must not exceed 1")
        _require(isinstance(self.workers, int) and 1 <= self.workers <= 64, "workers",
                 "must be an integer from 1 to 64")
        for name in ("grace", "behind_ms", "drain_s", "retry_s", "floor_seconds", "linger_ms"):
            _require(getattr(self, name) >= 0, name, "must not be negative")
        _require(0 <= self.metrics_port <= 65535, "metrics_port", "must be a port (0 = off)")
        _require(self.floor_ms is None or self.floor_ms >= 0, "floor_ms", "must not be negative")
        _require(self.floor_rate is None or self.floor_rate > 0, "floor_rate", "must be positive")
        topics = [self.events_topic, self.alerts_topic, self.dlq_topic]
        _require(all(topics) and len(set(topics)) == 3, "topics",
                 "events, alerts and dead-letter topics must be three different names")
        _require(self.floor_topic not in topics, "floor_topic",
                 "must differ from the events, alerts and dead-letter topics")
        _require(self.rate * self.duration <= 50_000_000, "rate",
                 "times duration exceeds 50 million events")

    def schedule(self) -> Schedule:
        return Schedule(self.rate, self.duration, self.ramp)


#: The ``loadgen`` flag of each setting whose flag is not its name with dashes, so that
#: an error names what the user typed.
FLAGS = {"bootstrap": "--bootstrap-server", "retry_s": "--retry", "drain_s": "drain",
         "floor_seconds": "--floor-duration", "topic_partitions": "--partitions",
         "topics": "--events-topic, --alerts-topic and --dlq-topic:"}


def _require(ok: bool, name: str, problem: str) -> None:
    if not ok:
        raise ConfigError(f"{FLAGS.get(name, '--' + name.replace('_', '-'))} {problem}")
