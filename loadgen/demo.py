"""``appliance demo``: embedded broker + appliance + load generator, then a latency report.

It lives with the load generator, not in the appliance package: the demo drives the
appliance with load, so it depends on both, and the product must not depend on its own
load tool. ``appliance demo`` stays the documented command: ``loadgen.demo_cli.DEMO``
adds it to the ``appliance`` CLI through the ``appliance.commands`` entry point
(pyproject.toml), and this module is imported only when it runs.

The appliance runs in this process; the load comes from ``run_load`` (open-loop producer
with end-to-end latency accounting), so the demo, the benchmark and ``loadgen run``
measure the same way.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from appliance import logs
from appliance.config import (
    Config,
    MetricsConfig,
    QueryConfig,
    RulesConfig,
    SparkConfig,
)
from appliance.process.runner import Appliance
from appliance.rules.rules_file import EXAMPLE_RULES
from loadgen.config import LoadConfig
from loadgen.report import Report, write_reports
from loadgen.run import run_load
from loadgen.steady import split_warmup

log = logs.get_logger("appliance.demo")


def demo_config(trigger: str, checkpoint_dir: str, bootstrap: str | None = None) -> Config:
    """A fresh-checkpoint config with the example rules, and free ports for the embedded
    broker and the metrics (a demo must not collide with an ``appliance run``)."""
    kafka = {"bootstrap_servers": bootstrap} if bootstrap else {"embedded_port": 0}
    return Config.model_validate({
        "kafka": kafka,
        # the trigger's shipped default interval (TriggerMode.default_interval)
        "query": QueryConfig(trigger=trigger, checkpoint_dir=checkpoint_dir,
                             starting_offsets="earliest"),
        "rules": RulesConfig(path=str(EXAMPLE_RULES)),
        "spark": SparkConfig(master="local[2]"),
        "metrics": MetricsConfig(port=0),
    })


def measure(appliance: Appliance, seconds: float, rate: float, report_path: str | None,
            floor_seconds: float = 2.0) -> Report:
    """Drive the running appliance with loadgen; returns loadgen's Report."""
    topics = appliance.config.topics
    if not appliance.probes.wait_until_processing():
        raise RuntimeError(f"query not processing: {appliance.probes.failure() or 'timeout'}")
    if appliance.bootstrap is None:
        raise RuntimeError("the appliance has no Kafka to load (not started)")
    load = LoadConfig(bootstrap=appliance.bootstrap, rate=rate, duration=seconds,
                      events_topic=topics.events, alerts_topic=topics.alerts,
                      dlq_topic=topics.dead_letters, floor_seconds=floor_seconds,
                      progress=False)
    report = run_load(load)
    if report_path:
        paths = write_reports(report, report_path)
        log.info("demo.report_written", **{k: str(v) for k, v in paths.items()})
    return report


def _ms(value) -> str:
    return "n/a" if value is None else f"{value:.1f} ms"


def summary(report: Report, trigger: str) -> str:
    """Totals and overall latency, then the warm-up and the steady state apart: the first
    seconds after ``ready`` and the rest are different stories (loadgen.steady)."""
    lat = report.latency_ms or {}
    split = split_warmup(report.latency_series)
    return (f"appliance demo ({trigger}): {report.sent} events at {report.achieved_rate:.0f}/s, "
            f"alerts {report.received_alerts}/{report.expected_alerts} (lost {report.lost}), "
            f"dead letters {report.dlq_received}/{report.dlq_expected}, "
            f"latency p50 {_ms(lat.get('p50'))}, p99 {_ms(lat.get('p99'))}\n"
            f"  warm-up (first {split.warmup_seconds} s): worst per-second p99 "
            f"{_ms(split.warmup_worst_p99_ms)}\n"
            f"  steady state: per-second p99 {_ms(split.steady_p99_ms)} (median), "
            f"{_ms(split.steady_worst_p99_ms)} (worst)")


def run_demo(seconds: float, rate: float, trigger: str, report: str | None) -> int:
    """0 every alert came back; 3 some were lost (the exit code of a load test that lost
    alerts, as ``loadgen run``'s)."""
    with tempfile.TemporaryDirectory(prefix="appliance-demo-") as tmp:
        appliance = Appliance(demo_config(trigger, str(Path(tmp) / "checkpoint")))
        try:
            appliance.start()
            result = measure(appliance, seconds, rate, report)
        finally:
            appliance.stop()
    print(summary(result, trigger))
    if report:
        print(f"reports: {report} (+ .md, .png)")
    return 0 if result.ok else 3
