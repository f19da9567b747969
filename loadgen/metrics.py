"""Prometheus metrics of a load run (``loadgen_`` prefix), served while it runs.

The latency histogram uses seconds (Prometheus convention) with buckets fine enough to
tell 0.5 ms from 1 ms from 2 ms, because the product promises millisecond alerts. Each
run gets its own registry so runs in one process never collide.
"""

from __future__ import annotations

from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

LATENCY_BUCKETS_S = (
    0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.05, 0.075,
    0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
)


class RunMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.sent = Counter("loadgen_events_sent", "Events handed to Kafka", registry=r)
        self.received = Counter("loadgen_alerts_received",
                                "Unique alerts of this run consumed", registry=r)
        self.duplicates = Counter("loadgen_alerts_duplicate", "Repeated alert ids", registry=r)
        self.dead_letters = Counter("loadgen_dead_letters_received",
                                    "Unique dead letters of this run consumed", registry=r)
        self.lost = Counter("loadgen_alerts_lost",
                            "Expected alerts that never arrived within the grace period",
                            registry=r)
        self.target_rate = Gauge("loadgen_target_rate", "Scheduled events per second",
                                 registry=r)
        self.schedule_lag = Gauge("loadgen_schedule_lag_seconds",
                                  "How far the slowest producer is behind its schedule",
                                  registry=r)
        self.latency = Histogram("loadgen_end_to_end_latency_seconds",
                                 "Scheduled send time to alert consumed",
                                 buckets=LATENCY_BUCKETS_S, registry=r)
        self.floor = Gauge("loadgen_floor_latency_seconds",
                           "The instrument's own latency (produce -> consume, no appliance), "
                           "measured before the run", ["quantile"], registry=r)
        self._server: WSGIServer | None = None
        self._totals = {"sent": 0, "received": 0, "dead_letters": 0, "duplicates": 0}

    def update(self, sent: int, received: int, dead_letters: int, duplicates: int,
               lag_s: float) -> None:
        """Bring the counters up to the run's running totals (counters only go up)."""
        for name, total in (("sent", sent), ("received", received),
                            ("dead_letters", dead_letters), ("duplicates", duplicates)):
            delta = total - self._totals[name]
            if delta > 0:
                getattr(self, name).inc(delta)
                self._totals[name] = total
        self.schedule_lag.set(lag_s)

    def serve(self, port: int, host: str = "127.0.0.1") -> int:
        """Start the HTTP endpoint; returns the bound port (useful with port 0)."""
        server, _thread = start_http_server(port, addr=host, registry=self.registry)
        self._server = server
        return server.server_port

    def set_floor(self, floor_ms: dict | None) -> None:
        """Publish the floor's percentiles (``p50``, ``p99``... in ms) as quantile gauges."""
        quantiles = {"p50": "0.5", "p90": "0.9", "p99": "0.99", "p999": "0.999"}
        for key, quantile in quantiles.items():
            value = (floor_ms or {}).get(key)
            if value is not None:
                self.floor.labels(quantile).set(value / 1000.0)

    def observe_latency_ms(self, latency_ms: float) -> None:
        self.latency.observe(latency_ms / 1000.0)

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
