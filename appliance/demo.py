"""``appliance demo``: embedded broker + appliance + load generator, then a latency report.

The appliance runs in this process; the load comes from ``loadgen`` (open-loop producer
with end-to-end latency accounting) through its Python API, so the demo, the benchmark
and ``loadgen run`` measure the same way.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from appliance.config import Config, MetricsConfig, QueryConfig, RulesConfig, SparkConfig
from appliance.logs import get_logger
from appliance.rules import EXAMPLE_RULES
from appliance.runner import Appliance

DEMO_INTERVAL = {"continuous": "1 second", "realtime": "5 seconds",
                 "microbatch": "0 seconds"}

log = get_logger("appliance.demo")


def demo_config(trigger: str, checkpoint_dir: str, bootstrap: str | None = None) -> Config:
    """A fresh-checkpoint config with the example rules and a free metrics port."""
    kafka = {"bootstrap_servers": bootstrap} if bootstrap else {}
    return Config.model_validate({
        "kafka": kafka,
        "query": QueryConfig(trigger=trigger, interval=DEMO_INTERVAL[trigger],
                             checkpoint_dir=checkpoint_dir, starting_offsets="earliest"),
        "rules": RulesConfig(path=str(EXAMPLE_RULES)),
        "spark": SparkConfig(master="local[2]"),
        "metrics": MetricsConfig(port=0),
    })


def measure(appliance: Appliance, seconds: float, rate: float, report_path: str | None,
            floor_seconds: float = 2.0):
    """Drive the running appliance with loadgen; returns loadgen's Report."""
    from loadgen.config import LoadConfig
    from loadgen.run import run_load

    topics = appliance.config.topics
    if not appliance.wait_until_processing():
        raise RuntimeError(f"query not processing: {appliance.failure() or 'timeout'}")
    load = LoadConfig(bootstrap=appliance.bootstrap, rate=rate, duration=seconds,
                      events_topic=topics.events, alerts_topic=topics.alerts,
                      dlq_topic=topics.dead_letters, floor_seconds=floor_seconds,
                      progress=False)
    report = run_load(load)
    if report_path:
        from loadgen.report import write_reports

        paths = write_reports(report, report_path)
        log.info("demo.report_written", **{k: str(v) for k, v in paths.items()})
    return report


def _ms(value) -> str:
    return "n/a" if value is None else f"{value:.1f} ms"


def summary(report, trigger: str) -> str:
    lat = report.latency_ms or {}
    return (f"appliance demo ({trigger}): {report.sent} events at {report.achieved_rate:.0f}/s, "
            f"alerts {report.received_alerts}/{report.expected_alerts} (lost {report.lost}), "
            f"dead letters {report.dlq_received}/{report.dlq_expected}, "
            f"latency p50 {_ms(lat.get('p50'))}, p99 {_ms(lat.get('p99'))}")


def run_demo(seconds: float, rate: float, trigger: str, report: str | None) -> int:
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
    return 0 if result.ok else 1
