"""Build the dashboards with ``grafana-foundation-sdk`` and write ``dashboards/json/*.json``.

    .venv/bin/python -m dashboards.build          # regenerate (commit the result)
    .venv/bin/python -m dashboards.build --check  # exit 1 if the committed JSON is stale

Panels are declared as data below (title, kind, unit, queries); the SDK turns them into
Grafana 11.6 dashboard models. Every query names only metrics the product exports
(``appliance_*``, ``loadgen_*``, ``broker_*``, Spark's servlet names under the fixed
namespace from ``appliance.tuning``) or the recording rules in ``prometheus/rules.yml``.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

from grafana_foundation_sdk.builders import dashboard as gdash
from grafana_foundation_sdk.builders import heatmap, stat, timeseries
from grafana_foundation_sdk.builders import prometheus as gprom
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import dashboard as mdash
from grafana_foundation_sdk.models import prometheus as mprom

from appliance.tuning import SPARK_METRICS_NAMESPACE
from dashboards.catalog import DATASOURCE_TYPE, DATASOURCE_UID, JSON_DIR

RI = "$__rate_interval"
DRIVER = f"metrics_{SPARK_METRICS_NAMESPACE}_driver"  # Spark driver servlet prefix


@dataclass(frozen=True)
class Q:
    expr: str
    legend: str = ""


@dataclass(frozen=True)
class P:
    title: str
    queries: tuple[Q, ...]
    unit: str = "short"
    kind: str = "timeseries"  # timeseries | heatmap | stat
    width: int = 12
    height: int = 8
    description: str = ""


def _q(*pairs: tuple[str, str] | str) -> tuple[Q, ...]:
    return tuple(Q(p) if isinstance(p, str) else Q(*p) for p in pairs)


APPLIANCE_LATENCY = ("appliance-latency", "Appliance latency", [
    ("Alert latency", [
        P("Alert latency p50 / p99 / p99.9", _q(
            ("appliance:alert_latency_seconds:p50_1m", "p50"),
            ("appliance:alert_latency_seconds:p99_1m", "p99"),
            ("appliance:alert_latency_seconds:p999_1m", "p99.9")), unit="s",
          description="Alert record's Kafka timestamp minus its event record's (in-band, "
                      "every alert); recording rules over 1 m."),
        P("Alert latency heatmap", _q(
            (f"sum by (le) (increase(appliance_alert_latency_seconds_bucket[{RI}]))",
             "{{le}}")), kind="heatmap", unit="s"),
        P("Alert latency p99 by severity", _q(
            ("histogram_quantile(0.99, sum by (le, severity) "
             f"(rate(appliance_alert_latency_seconds_bucket[{RI}])))", "{{severity}}")),
          unit="s"),
        P("Alerts observed per second by severity", _q(
            (f"sum by (severity) (rate(appliance_alert_latency_seconds_count[{RI}]))",
             "{{severity}}")), unit="ops"),
    ]),
    ("Throughput", [
        P("Events in / s", _q((f"rate(appliance_events_read_total[{RI}])", "events")),
          unit="ops", width=8),
        P("Alerts / s", _q((f"rate(appliance_alerts_written_total[{RI}])", "alerts")),
          unit="ops", width=8),
        P("Dead letters / s",
          _q((f"rate(appliance_dead_letters_written_total[{RI}])", "dead letters")),
          unit="ops", width=8),
    ]),
    ("Lag and health", [
        P("Consumer lag (records)",
          _q(("appliance_consumer_lag", "{{topic}}/{{partition}}")), width=12),
        P("Consumer lag (seconds at the current read rate)", _q(
            (f"appliance_consumer_lag / clamp_min(rate(appliance_committed_offset[{RI}]), "
             "0.001)", "{{topic}}/{{partition}}")), unit="s", width=12,
          description="Backlog divided by the partition's read rate: how long it takes to "
                      "drain at the current speed."),
        P("Query up", _q(("appliance_query_up", "up")), kind="stat", width=4, height=5),
        P("Trigger mode", _q(("appliance_trigger_info", "{{trigger}}")), kind="stat",
          width=5, height=5),
        P("Restarts (recoveries from checkpoint)",
          _q(("sum(increase(appliance_recoveries_total[$__range]))", "recoveries")),
          kind="stat", width=5, height=5),
        P("Last progress age", _q(("appliance_query_last_progress_age_seconds", "age")),
          unit="s", kind="stat", width=5, height=5),
        P("Rules loaded", _q(("appliance_rules", "rules")), kind="stat", width=5, height=5),
    ]),
])

LOAD_TEST = ("appliance-load-test", "Load test", [
    ("Load generator", [
        P("Sent / received per second", _q(
            (f"rate(loadgen_events_sent_total[{RI}])", "events sent"),
            (f"rate(loadgen_alerts_received_total[{RI}])", "alerts received"),
            (f"rate(loadgen_dead_letters_received_total[{RI}])", "dead letters received")),
          unit="ops"),
        P("Lost and duplicate alerts", _q(
            ("loadgen_alerts_lost_total", "lost"),
            ("loadgen_alerts_duplicate_total", "duplicates")), width=6),
        P("Target rate and schedule lag", _q(
            ("loadgen_target_rate", "target events/s"),
            ("loadgen_schedule_lag_seconds", "schedule lag (s)")), width=6),
        P("End-to-end latency p50 / p99 / p99.9", _q(
            ("loadgen:end_to_end_latency_seconds:p50_1m", "p50"),
            ("loadgen:end_to_end_latency_seconds:p99_1m", "p99"),
            ("loadgen:end_to_end_latency_seconds:p999_1m", "p99.9")), unit="s"),
        P("Latency floor (the instrument alone)", _q(
            ("loadgen_floor_latency_seconds", "floor q{{quantile}}")), unit="s"),
        P("End-to-end vs in-band p99", _q(
            ("loadgen:end_to_end_latency_seconds:p99_1m", "load generator p99"),
            ("appliance:alert_latency_seconds:p99_1m", "appliance in-band p99")), unit="s",
          width=24),
    ]),
])

CLUSTER_BROKER = ("appliance-cluster", "Cluster and broker", [
    ("Spark", [
        P("Workers alive", _q(("metrics_master_aliveWorkers_Value", "alive workers")),
          kind="stat", width=6, height=5),
        P("Cores in use", _q(("sum(metrics_worker_coresUsed_Value)", "cores used"),
                             ("sum(metrics_worker_coresFree_Value)", "cores free")),
          kind="stat", width=6, height=5),
        P("Streaming query input rate (micro-batch)", _q(
            (f"{DRIVER}_spark_streaming_appliance_inputRate_total_Value", "rows/s")),
          unit="ops", width=12, height=5),
        P("JVM heap used", _q(
            (f"{DRIVER}_ExecutorMetrics_JVMHeapMemory_Value", "driver"),
            ("metrics_executor_JVMHeapMemory_bytes", "executor {{executor_id}}")),
          unit="bytes"),
        P("GC time per second", _q(
            (f"rate({DRIVER}_ExecutorMetrics_TotalGCTime_Value[{RI}]) / 1000", "driver"),
            (f"rate(metrics_executor_totalGCTime_seconds_total[{RI}])",
             "executor {{executor_id}}")), unit="percentunit"),
    ]),
    ("Broker", [
        P("Broker requests / s by API and error", _q(
            (f"sum by (api, error) (rate(broker_requests_total[{RI}]))",
             "{{api}} {{error}}")), unit="reqps"),
        P("Produce and fetch latency p99", _q(
            ("histogram_quantile(0.99, sum by (le, api) "
             f"(rate(broker_request_latency_seconds_bucket[{RI}])))", "{{api}} p99"),
            ("histogram_quantile(0.5, sum by (le, api) "
             f"(rate(broker_request_latency_seconds_bucket[{RI}])))", "{{api}} p50")),
          unit="s", description="A long-polled fetch includes its wait for data."),
        P("Broker bytes in / out", _q(
            (f"rate(broker_bytes_in_total[{RI}])", "in"),
            (f"rate(broker_bytes_out_total[{RI}])", "out")), unit="Bps", width=8),
        P("Broker connections", _q(("broker_connections", "open")), width=8),
        P("Log end offset per partition",
          _q(("broker_log_end_offset", "{{topic}}/{{partition}}")), width=8),
        P("Alert consumers' lag per group", _q(
            ('sum by (group) (broker_group_lag{topic="alerts"})', "{{group}}")), width=24,
          description="Records of the alerts topic that each consumer group reading it "
                      "(alert forwarders, sinks) has not committed yet: the log end minus "
                      "the committed offset, summed over partitions."),
    ]),
])

DASHBOARDS = (APPLIANCE_LATENCY, LOAD_TEST, CLUSTER_BROKER)


def _datasource() -> mdash.DataSourceRef:
    return mdash.DataSourceRef(type_val=DATASOURCE_TYPE, uid=DATASOURCE_UID)


def _panel(spec: P):
    builder = {"timeseries": timeseries.Panel, "heatmap": heatmap.Panel,
               "stat": stat.Panel}[spec.kind]()
    builder = (builder.title(spec.title).datasource(_datasource()).unit(spec.unit)
               .span(spec.width).height(spec.height))
    if spec.description:
        builder = builder.description(spec.description)
    for ref, query in zip("ABCDEFGH", spec.queries, strict=False):
        target = (gprom.Dataquery().expr(query.expr).legend_format(query.legend)
                  .ref_id(ref).datasource(_datasource()))
        if spec.kind == "heatmap":
            target = target.format(mprom.PromQueryFormat.HEATMAP)
        builder = builder.with_target(target)
    return builder


def build(uid: str, title: str, rows) -> dict:
    board = (gdash.Dashboard(title).uid(uid).tags(["appliance"]).refresh("10s")
             .time("now-30m", "now").timezone("utc").editable())
    for row_title, panels in rows:
        board = board.with_row(gdash.Row(row_title))
        for spec in panels:
            board = board.with_panel(_panel(spec))
    return json.loads(json.dumps(board.build(), cls=JSONEncoder, sort_keys=True))


def render_all() -> dict[str, str]:
    """File name -> JSON text for every dashboard (what is committed under json/)."""
    return {f"{uid}.json": json.dumps(build(uid, title, rows), indent=2, sort_keys=True) + "\n"
            for uid, title, rows in DASHBOARDS}


def stale(json_dir: Path = JSON_DIR) -> list[str]:
    """Names of committed JSON files that differ from (or are missing for) the builders."""
    wanted = render_all()
    out = [name for name, text in wanted.items()
           if not (json_dir / name).is_file() or (json_dir / name).read_text() != text]
    out += [p.name for p in json_dir.glob("*.json") if p.name not in wanted]
    return sorted(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dashboards.build")
    parser.add_argument("--check", action="store_true", help="exit 1 if the JSON is stale")
    args = parser.parse_args(argv)
    if args.check:
        names = stale()
        for name in names:
            print(f"dashboards/json/{name}: stale, run python -m dashboards.build",
                  file=sys.stderr)
        return 1 if names else 0
    JSON_DIR.mkdir(parents=True, exist_ok=True)
    for old in JSON_DIR.glob("*.json"):
        old.unlink()
    for name, text in render_all().items():
        (JSON_DIR / name).write_text(text)
        print(f"wrote dashboards/json/{name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
