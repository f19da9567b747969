"""Build the dashboards with ``grafana-foundation-sdk`` and write ``dashboards/json/*.json``.

    .venv/bin/python -m dashboards.build          # regenerate (commit the result)
    .venv/bin/python -m dashboards.build --check  # exit 1 if the committed JSON is stale

Panels are declared as data below (title, kind, unit, queries); the SDK turns them into
Grafana 11.6 dashboard models. Every query names only metrics the product exports
(``appliance_*``, ``loadgen_*``, ``broker_*``, Spark's servlet names under the fixed
namespace from ``appliance.tuning``) or the recording rules in ``prometheus/rules.yml``.
Every dashboard has a datasource variable (default: the provisioned Prometheus) and an
instance variable every query follows, marks restarts and rule reloads as annotations,
and draws the latency target (``catalog.LATENCY_TARGET_S``) as a dashed line.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grafana_foundation_sdk.builders import common as gcommon
from grafana_foundation_sdk.builders import dashboard as gdash
from grafana_foundation_sdk.builders import heatmap, stat, timeseries
from grafana_foundation_sdk.builders import prometheus as gprom
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common as mcommon
from grafana_foundation_sdk.models import dashboard as mdash
from grafana_foundation_sdk.models import prometheus as mprom

from appliance.tuning import SPARK_METRICS_NAMESPACE
from dashboards.catalog import (
    DATASOURCE_TYPE,
    DATASOURCE_UID,
    DATASOURCE_VARIABLE,
    INSTANCE_ALL,
    JSON_DIR,
    LATENCY_OBJECTIVE,
    LATENCY_TARGET_LE,
    LATENCY_TARGET_S,
)

RI = "$__rate_interval"
DRIVER = f"metrics_{SPARK_METRICS_NAMESPACE}_driver"  # Spark driver servlet prefix
BUDGET = round(1 - LATENCY_OBJECTIVE, 6)  # the share of alerts allowed over the target
TARGET_MS = f"{LATENCY_TARGET_S * 1000:g} ms"


INSTANCE = 'instance=~"$instance"'


def sel(metric: str, *matchers: str) -> str:
    """``metric{instance=~"$instance",matchers...}``: every query follows the dashboard's
    instance variable (All: every instance)."""
    return f"{metric}{{{','.join((INSTANCE, *matchers))}}}"


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
    # Dashed lines at these values (the latency target): a time series' thresholds (one
    # line red; two: orange, then red).
    lines: tuple[float, ...] = ()


@dataclass(frozen=True)
class Board:
    uid: str
    title: str
    # Which scrape jobs' targets the instance variable lists.
    instance_jobs: str
    rows: tuple[tuple[str, tuple[P, ...]], ...]


def _q(*pairs: tuple[str, str] | str) -> tuple[Q, ...]:
    return tuple(Q(p) if isinstance(p, str) else Q(*p) for p in pairs)


TARGET = (LATENCY_TARGET_S,)

APPLIANCE_LATENCY = Board("appliance-latency", "Appliance latency", "appliance", (
    ("Alert latency", (
        P("Alert latency p50 / p99 / p99.9", _q(
            (sel("appliance:alert_latency_seconds:p50_1m"), "p50 {{instance}}"),
            (sel("appliance:alert_latency_seconds:p99_1m"), "p99 {{instance}}"),
            (sel("appliance:alert_latency_seconds:p999_1m"), "p99.9 {{instance}}")),
          unit="s", lines=TARGET,
          description="Alert record's Kafka timestamp minus its event record's (in-band, "
                      f"every alert); recording rules over 1 m. Dashed: the {TARGET_MS} "
                      "target."),
        P("Alert latency heatmap", _q(
            (f"sum by (le) (increase({sel('appliance_alert_latency_seconds_bucket')}[{RI}]))",
             "{{le}}")), kind="heatmap", unit="s"),
        P("Alert latency p99 by severity", _q(
            ("histogram_quantile(0.99, sum by (le, severity) "
             f"(rate({sel('appliance_alert_latency_seconds_bucket')}[{RI}])))",
             "{{severity}}")), unit="s", lines=TARGET),
        P(f"Latency error budget burn rate ({LATENCY_OBJECTIVE:.0%} within {TARGET_MS})", _q(
            (f"{sel('appliance:alert_latency_over_target:ratio_5m')} / {BUDGET}",
             "5 m {{instance}}"),
            (f"{sel('appliance:alert_latency_over_target:ratio_1h')} / {BUDGET}",
             "1 h {{instance}}")), lines=(1.0, 14.4),
          description=f"Share of alerts slower than the target (the le=\"{LATENCY_TARGET_LE}\" "
                      f"bucket) divided by the {BUDGET:.0%} the target allows: 1 spends the "
                      "error budget exactly on time; 14.4 on both windows fires "
                      "ApplianceLatencyBudgetBurn."),
        P("Alerts observed per second by severity", _q(
            (f"sum by (severity) (rate({sel('appliance_alert_latency_seconds_count')}[{RI}]))",
             "{{severity}}")), unit="ops", width=24),
    )),
    ("Throughput", (
        P("Events in / s", _q((f"rate({sel('appliance_events_read_total')}[{RI}])",
                               "{{instance}}")), unit="ops", width=8),
        P("Alerts / s", _q((f"rate({sel('appliance_alerts_written_total')}[{RI}])",
                            "{{instance}}")), unit="ops", width=8),
        P("Dead letters / s",
          _q((f"rate({sel('appliance_dead_letters_written_total')}[{RI}])", "{{instance}}")),
          unit="ops", width=8),
    )),
    ("Lag and health", (
        P("Oldest unread event age", _q(
            (sel("appliance_consumer_lag_seconds"), "{{topic}}/{{partition}}")), unit="s",
          width=8,
          description="Now minus the Kafka timestamp of the next record the query will read "
                      "(its committed offset), per partition; 0 when caught up. Grows one "
                      "second per second while the query is stopped."),
        P("Consumer lag (records)",
          _q((sel("appliance_consumer_lag"), "{{topic}}/{{partition}}")), width=8),
        P("Time to drain the backlog at the current read rate", _q(
            (f"{sel('appliance_consumer_lag')} / clamp_min(rate("
             f"{sel('appliance_committed_offset')}[{RI}]), 0.001)", "{{topic}}/{{partition}}")),
          unit="s", width=8,
          description="Backlog divided by the partition's read rate: how long it takes to "
                      "drain at the current speed (huge while the query is stalled; the "
                      "age on the left says how long events have waited)."),
        P("Query up", _q((sel("appliance_query_up"), "{{instance}}")), kind="stat", width=4,
          height=5),
        P("Trigger mode", _q((sel("appliance_trigger_info"), "{{trigger}}")), kind="stat",
          width=5, height=5),
        P("Restarts (recoveries from checkpoint)",
          _q((f"sum(increase({sel('appliance_recoveries_total')}[$__range]))", "recoveries")),
          kind="stat", width=5, height=5),
        P("Last progress age", _q((sel("appliance_query_last_progress_age_seconds"),
                                   "{{instance}}")), unit="s", kind="stat", width=5, height=5),
        P("Rules loaded and their version", _q(
            (sel("appliance_rules"), "{{instance}}"),
            (sel("appliance_rules_info"), "version {{version}}")), kind="stat", width=5,
          height=5, description="The running rules' content hash (alerts carry it as "
                                "rules_version); a reload that applied a new file changes it."),
    )),
    ("Rules", (
        P("Rules that alert most", _q(
            (f"topk(10, rate({sel('appliance_rule_alerts_total')}[{RI}]))", "{{rule}}")),
          unit="ops", width=12,
          description="Alerts per second listing each rule, for the [metrics] top_rules "
                      "rules that alerted most since start (the only rules with a series: "
                      "appliance rules stats lists every rule's counts)."),
        P("Rules tried per event", _q(
            (f"rate({sel('appliance_rule_evaluations_total')}[{RI}]) / clamp_min(rate("
             f"{sel('appliance_rule_events_total')}[{RI}]), 1e-9)", "{{instance}}")),
          width=6,
          description="Rule evaluations per valid event: the index evaluates only the "
                      "rules an event's metric, source and tags can match, plus the rules "
                      "with no equality to file them by."),
        P("Rules that never matched / no event reached", _q(
            (sel("appliance_rules_unmatched"), "never matched"),
            (sel("appliance_rules_unreached"), "no event reached")), kind="stat", width=6,
          description="Never matched: no alert since start. No event reached: indexed rules "
                      "whose required value (a metric name, a source, a tag) no event had."),
    )),
))

LOAD_TEST = Board("appliance-load-test", "Load test", "loadgen", (
    ("Load generator", (
        P("Sent / received per second", _q(
            (f"rate({sel('loadgen_events_sent_total')}[{RI}])", "events sent"),
            (f"rate({sel('loadgen_alerts_received_total')}[{RI}])", "alerts received"),
            (f"rate({sel('loadgen_dead_letters_received_total')}[{RI}])",
             "dead letters received")), unit="ops"),
        P("Lost and duplicate alerts", _q(
            (sel("loadgen_alerts_lost_total"), "lost"),
            (sel("loadgen_alerts_duplicate_total"), "duplicates")), width=6),
        P("Target rate and schedule lag", _q(
            (sel("loadgen_target_rate"), "target events/s"),
            (sel("loadgen_schedule_lag_seconds"), "schedule lag (s)")), width=6),
        P("End-to-end latency p50 / p99 / p99.9", _q(
            (sel("loadgen:end_to_end_latency_seconds:p50_1m"), "p50"),
            (sel("loadgen:end_to_end_latency_seconds:p99_1m"), "p99"),
            (sel("loadgen:end_to_end_latency_seconds:p999_1m"), "p99.9")), unit="s",
          lines=TARGET),
        P("Latency floor (the instrument alone)", _q(
            (sel("loadgen_floor_latency_seconds"), "floor q{{quantile}}")), unit="s"),
        P("End-to-end vs in-band p99", _q(
            (sel("loadgen:end_to_end_latency_seconds:p99_1m"), "load generator p99"),
            ("appliance:alert_latency_seconds:p99_1m", "appliance in-band p99 {{instance}}")),
          unit="s", width=24, lines=TARGET),
    )),
))

CLUSTER_BROKER = Board("appliance-cluster", "Cluster and broker",
                       "spark-master|spark-worker|spark-driver|broker", (
    ("Spark", (
        P("Workers alive", _q((sel("metrics_master_aliveWorkers_Value"), "alive workers")),
          kind="stat", width=6, height=5),
        P("Cores in use", _q((f"sum({sel('metrics_worker_coresUsed_Value')})", "cores used"),
                             (f"sum({sel('metrics_worker_coresFree_Value')})", "cores free")),
          kind="stat", width=6, height=5),
        P("Streaming query input rate (micro-batch)", _q(
            (sel(f"{DRIVER}_spark_streaming_appliance_inputRate_total_Value"), "rows/s")),
          unit="ops", width=12, height=5),
        P("JVM heap used", _q(
            (sel(f"{DRIVER}_ExecutorMetrics_JVMHeapMemory_Value"), "driver"),
            (sel("metrics_executor_JVMHeapMemory_bytes"), "executor {{executor_id}}")),
          unit="bytes"),
        P("GC time per second", _q(
            (f"rate({sel(f'{DRIVER}_ExecutorMetrics_TotalGCTime_Value')}[{RI}]) / 1000",
             "driver"),
            (f"rate({sel('metrics_executor_totalGCTime_seconds_total')}[{RI}])",
             "executor {{executor_id}}")), unit="percentunit"),
    )),
    ("Broker", (
        P("Broker requests / s by API and error", _q(
            (f"sum by (api, error) (rate({sel('broker_requests_total')}[{RI}]))",
             "{{api}} {{error}}")), unit="reqps"),
        P("Produce and fetch latency p99", _q(
            ("histogram_quantile(0.99, sum by (le, api) "
             f"(rate({sel('broker_request_latency_seconds_bucket')}[{RI}])))", "{{api}} p99"),
            ("histogram_quantile(0.5, sum by (le, api) "
             f"(rate({sel('broker_request_latency_seconds_bucket')}[{RI}])))", "{{api}} p50")),
          unit="s", description="A long-polled fetch includes its wait for data."),
        P("Broker bytes in / out", _q(
            (f"rate({sel('broker_bytes_in_total')}[{RI}])", "in"),
            (f"rate({sel('broker_bytes_out_total')}[{RI}])", "out")), unit="Bps", width=8),
        P("Broker connections", _q((sel("broker_connections"), "open")), width=8),
        P("Log end offset per partition",
          _q((sel("broker_log_end_offset"), "{{topic}}/{{partition}}")), width=8),
        P("Alert consumers' lag per group", _q(
            ("sum by (group) (" + sel("broker_group_lag", 'topic="alerts"') + ")", "{{group}}")),
          width=24,
          description="Records of the alerts topic that each consumer group reading it "
                      "(alert forwarders, sinks) has not committed yet: the log end minus "
                      "the committed offset, summed over partitions."),
    )),
))

# Events every dashboard marks on its time axis (annotations are no panels: they may have
# nothing to show). Restarts: a new appliance process (its start time changes) or a query
# restarted from its checkpoint in place; rules reloads: a rules file applied live.
ANNOTATIONS = (
    ("Appliance restarts", "orange",
     "changes(appliance_start_time_seconds[1m]) > 0 "
     "or increase(appliance_recoveries_total[1m]) > 0"),
    ("Rules reloads", "blue",
     'increase(appliance_rules_reloads_total{result="applied"}[1m]) > 0'),
)

DASHBOARDS = (APPLIANCE_LATENCY, LOAD_TEST, CLUSTER_BROKER)


def _datasource() -> mdash.DataSourceRef:
    """Panels name the datasource variable; its default is the provisioned datasource."""
    return mdash.DataSourceRef(type_val=DATASOURCE_TYPE, uid=DATASOURCE_VARIABLE)


def _variables(board: Board) -> list:
    datasource = (gdash.DatasourceVariable("datasource").label("Prometheus")
                  .type(DATASOURCE_TYPE)
                  .current(mdash.VariableOption(text=DATASOURCE_UID, value=DATASOURCE_UID)))
    instance = (gdash.QueryVariable("instance").label("Instance").datasource(_datasource())
                .query(f'label_values(up{{job=~"{board.instance_jobs}"}}, instance)')
                .multi(True).include_all(True).all_value(INSTANCE_ALL)
                .current(mdash.VariableOption(text="All", value="$__all"))
                .refresh(mdash.VariableRefresh.ON_TIME_RANGE_CHANGED)
                .sort(mdash.VariableSort.ALPHABETICAL_ASC))
    return [datasource, instance]


def _annotations() -> list:
    return [gdash.AnnotationQuery().name(name).datasource(_datasource()).enable(True)
            .icon_color(color).expr(expr) for name, color, expr in ANNOTATIONS]


def _panel(spec: P):
    kinds: dict[str, Any] = {"timeseries": timeseries.Panel, "heatmap": heatmap.Panel,
                             "stat": stat.Panel}
    builder = kinds[spec.kind]()
    builder = (builder.title(spec.title).datasource(_datasource()).unit(spec.unit)
               .span(spec.width).height(spec.height))
    if spec.description:
        builder = builder.description(spec.description)
    if spec.lines:
        colors = ("red",) if len(spec.lines) == 1 else ("orange", "red")
        steps = [mdash.Threshold(None, "green")]
        steps += [mdash.Threshold(v, c) for v, c in zip(spec.lines, colors, strict=True)]
        builder = (builder.thresholds(gdash.ThresholdsConfig()
                                      .mode(mdash.ThresholdsMode.ABSOLUTE).steps(steps))
                   .thresholds_style(gcommon.GraphThresholdsStyleConfig()
                                     .mode(mcommon.GraphThresholdsStyleMode.DASHED)))
    for ref, query in zip("ABCDEFGH", spec.queries, strict=False):
        target = (gprom.Dataquery().expr(query.expr).legend_format(query.legend)
                  .ref_id(ref).datasource(_datasource()))
        if spec.kind == "heatmap":
            target = target.format(mprom.PromQueryFormat.HEATMAP)
        builder = builder.with_target(target)
    return builder


def build(spec: Board) -> dict:
    board = (gdash.Dashboard(spec.title).uid(spec.uid).tags(["appliance"]).refresh("10s")
             .time("now-30m", "now").timezone("utc").editable()
             .variables(_variables(spec)).annotations(_annotations()))
    for row_title, panels in spec.rows:
        board = board.with_row(gdash.Row(row_title))
        for panel in panels:
            board = board.with_panel(_panel(panel))
    model = json.loads(json.dumps(board.build(), cls=JSONEncoder, sort_keys=True))
    # Fields of a Prometheus annotation the SDK's model does not carry: a title per event
    # and the step (one mark per minute at most).
    for annotation, (name, _color, _expr) in zip(model["annotations"]["list"], ANNOTATIONS,
                                                 strict=True):
        annotation.update({"step": "60s", "titleFormat": name, "useValueForTime": False})
    return model


def render_all() -> dict[str, str]:
    """File name -> JSON text for every dashboard (what is committed under json/)."""
    return {f"{spec.uid}.json": json.dumps(build(spec), indent=2, sort_keys=True) + "\n"
            for spec in DASHBOARDS}


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
