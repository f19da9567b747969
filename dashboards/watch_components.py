"""The components ``appliance watch`` can scrape, with the scrape jobs of
dashboards/prometheus/prometheus.yml each one serves and how it is recognized at its
default port (``dashboards.watch_targets`` looks for them).

Standard library only: ``dashboards.cli`` builds the watch's flags from this table, and
``appliance --help`` imports that module.
"""

from __future__ import annotations

from dataclasses import dataclass

HOST = "127.0.0.1"


@dataclass(frozen=True)
class Component:
    """Something the watch can scrape: the scrape jobs of prometheus.yml it serves, and how
    it is recognized at its default port."""

    name: str
    port: int  # where it is looked for on HOST
    jobs: tuple[str, ...]
    probe_path: str  # a metrics page it serves...
    marker: str  # ...with a metric name holding this
    runs_as: str  # how it is started with that port, for the help

    @property
    def flag(self) -> str:
        return f"--{self.name}"

    @property
    def default(self) -> str:
        return f"{HOST}:{self.port}"


APPLIANCE = Component("appliance", 9464, ("appliance",), "/metrics", "appliance_",
                      "appliance run: [metrics] port")
COMPONENTS = (
    APPLIANCE,
    Component("broker", 9465, ("broker",), "/metrics", "broker_",
              "appliance broker --metrics-port 9465"),
    Component("loadgen", 9466, ("loadgen",), "/metrics", "loadgen_",
              "loadgen run --metrics-port 9466"),
    Component("spark-master", 8080, ("spark-master", "spark-applications"),
              "/metrics/master/prometheus/", "metrics_master_",
              "a Spark standalone master's web UI"),
    Component("spark-worker", 8081, ("spark-worker",), "/metrics/prometheus/",
              "metrics_worker_", "a Spark standalone worker's web UI"),
    Component("spark-driver", 4040, ("spark-driver", "spark-executors"),
              "/metrics/prometheus/", "_driver_",
              'the driver\'s UI: spark.ui.enabled = "true" in [spark]'),
)
BY_NAME = {component.name: component for component in COMPONENTS}
