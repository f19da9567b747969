"""Dashboards, scrape config and rules as files: fresh, valid, unit-tested with promtool."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
import yaml

from appliance.observability.alert_latency import BUCKETS_MS
from appliance.trigger import TRIGGERS
from dashboards import build, catalog

ROOT = catalog.PACKAGE_DIR.parent
RUNBOOKS = ROOT / "docs" / "runbooks.md"

PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None, reason="promtool missing: `make setup` installs Debian's prometheus")


def test_committed_json_is_what_the_builders_produce(tmp_path):
    assert build.stale() == [], "run: .venv/bin/python -m dashboards.build"
    # ...and the check really notices a change.
    for name, text in build.render_all().items():
        (tmp_path / name).write_text(text)
    assert build.stale(tmp_path) == []
    first = sorted(tmp_path.glob("*.json"))[0]
    first.write_text(first.read_text().replace("appliance", "appliancx", 1))
    assert build.stale(tmp_path) == [first.name]


def test_dashboards_have_the_required_panels_on_the_fixed_datasource():
    boards = {b.uid: b for b in catalog.load()}
    assert set(boards) == {"appliance-latency", "appliance-load-test", "appliance-cluster"}
    titles = {uid: " | ".join(p.title for p in b.panels) for uid, b in boards.items()}
    for word in ("p50 / p99 / p99.9", "heatmap", "Events in", "Alerts / s", "Dead letters",
                 "lag (records)", "Oldest unread event age", "burn rate", "Query up",
                 "Trigger", "Restarts"):
        assert word in titles["appliance-latency"], word
    for word in ("Sent / received", "Lost", "End-to-end latency", "floor"):
        assert word in titles["appliance-load-test"], word
    for word in ("Workers alive", "Cores in use", "JVM heap", "GC time", "requests",
                 "latency"):
        assert word in titles["appliance-cluster"], word
    for board in boards.values():
        model = board.model()
        for panel in model["panels"]:
            if panel["type"] != "row":
                assert panel["datasource"] == {"type": "prometheus",
                                               "uid": catalog.DATASOURCE_VARIABLE}
                assert panel["targets"], panel["title"]


def test_every_dashboard_has_datasource_and_instance_variables_every_query_follows():
    unfiltered = []
    for board in catalog.load():
        variables = {v["name"]: v for v in board.model()["templating"]["list"]}
        assert set(variables) == {"datasource", "instance"}, board.uid
        source = variables["datasource"]
        assert source["type"] == "datasource" and source["query"] == "prometheus"
        assert source["current"]["value"] == catalog.DATASOURCE_UID  # the provisioned one
        instance = variables["instance"]
        assert instance["type"] == "query" and instance["includeAll"] and instance["multi"]
        assert instance["allValue"] == catalog.INSTANCE_ALL
        assert instance["datasource"]["uid"] == catalog.DATASOURCE_VARIABLE
        assert instance["query"].startswith("label_values(up{job=~")
        unfiltered += [t.expr for p in board.panels for t in p.targets
                       if 'instance=~"$instance"' not in t.expr]
    # The one exception: the load test's comparison with the appliance's own p99 (the
    # load test dashboard's instances are load generators).
    assert unfiltered == ["appliance:alert_latency_seconds:p99_1m"]
    expanded = catalog.expand('up{instance=~"$instance"} + up{instance=~"${instance}"}', 5, 60)
    assert expanded == 'up{instance=~".*"} + up{instance=~".*"}'


def test_annotations_mark_restarts_and_rules_reloads_on_every_dashboard():
    for board in catalog.load():
        annotations = {a["name"]: a for a in board.model()["annotations"]["list"]}
        assert set(annotations) == {"Appliance restarts", "Rules reloads"}, board.uid
        assert "appliance_start_time_seconds" in annotations["Appliance restarts"]["expr"]
        assert 'appliance_rules_reloads_total{result="applied"}' in \
            annotations["Rules reloads"]["expr"]
        for annotation in annotations.values():
            assert annotation["datasource"]["uid"] == catalog.DATASOURCE_VARIABLE
            assert annotation["enable"] is True


def test_the_latency_target_is_one_number_in_panels_rules_and_histogram():
    """The panels' target line is the continuous trigger's target in the rules, read from a
    bucket the histogram has; every trigger's target names its own bucket, and the alert
    and the error ratio follow the deployed trigger's (appliance_trigger_info)."""
    target = catalog.LATENCY_TARGET_S
    assert float(catalog.LATENCY_TARGET_LE) == target
    assert target * 1000 in BUCKETS_MS  # the le bucket the burn rate reads exists
    rules = yaml.safe_load((catalog.PROMETHEUS_DIR / "rules.yml").read_text())
    targets = {r["labels"]["trigger"]: r for g in rules["groups"] for r in g["rules"]
               if r.get("record") == "appliance:alert_latency_target_seconds"}
    assert set(targets) == set(TRIGGERS)
    for trigger, rule in targets.items():
        seconds = float(rule["expr"].split(" * ", 1)[0])
        assert rule["labels"]["le"] == repr(seconds)  # the exporter's spelling of its bound
        assert seconds * 1000 in BUCKETS_MS, trigger
        assert f'appliance_trigger_info{{trigger="{trigger}"}}' in rule["expr"]
    assert targets["continuous"]["labels"]["le"] == catalog.LATENCY_TARGET_LE
    by_name = {r.get("alert") or r["record"]: r for g in rules["groups"] for r in g["rules"]}
    assert by_name["ApplianceAlertLatencyHigh"]["expr"].endswith(
        "appliance:alert_latency_target_seconds")
    for window in ("5m", "1h"):
        assert "and on (job, instance, le) appliance:alert_latency_target_seconds" in \
            " ".join(by_name[f"appliance:alert_latency_over_target:ratio_{window}"]["expr"].split())
    budget = round(1 - catalog.LATENCY_OBJECTIVE, 6)
    assert f"14.4 * {budget:g}" in by_name["ApplianceLatencyBudgetBurn"]["expr"]
    lines = {}
    for board in catalog.load():
        for panel in board.model()["panels"]:
            steps = panel.get("fieldConfig", {}).get("defaults", {}).get("thresholds", {})
            if steps:
                assert panel["fieldConfig"]["defaults"]["custom"]["thresholdsStyle"] == \
                    {"mode": "dashed"}
                lines[panel["title"]] = [s["value"] for s in steps["steps"][1:]]
    latency = {t: v for t, v in lines.items() if "burn rate" not in t}
    assert set(latency) >= {"Alert latency p50 / p99 / p99.9", "Alert latency p99 by severity",
                            "End-to-end latency p50 / p99 / p99.9"}
    assert all(v == [target] for v in latency.values()), latency
    (burn,) = [v for t, v in lines.items() if "burn rate" in t]
    assert burn == [1.0, 14.4]


def _anchors(markdown: str) -> set[str]:
    """GitHub's anchors of a Markdown file's headings."""
    return {re.sub(r"[^\w\- ]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
            for line in markdown.splitlines() if line.startswith("#")}


def test_every_alert_has_a_summary_and_a_runbook_section_in_docs():
    rules = yaml.safe_load((catalog.PROMETHEUS_DIR / "rules.yml").read_text())
    alerts = [r for g in rules["groups"] for r in g["rules"] if "alert" in r]
    anchors = _anchors(RUNBOOKS.read_text())
    for alert in alerts:
        annotations = alert["annotations"]
        assert annotations["summary"].strip(), alert["alert"]
        path, _, anchor = annotations["runbook_url"].partition("#")
        assert path == "docs/runbooks.md" and (ROOT / path).is_file(), alert["alert"]
        assert anchor == alert["alert"].lower() and anchor in anchors, alert["alert"]
    # ...and no runbook section for an alert that does not exist.
    sections = {a for a in anchors if a != "runbooks-what-to-do-when-an-appliance-alert-fires"}
    assert sections == {a["alert"].lower() for a in alerts}


def test_provisioning_files_name_the_fixed_datasource_uid_and_the_folder():
    prov = catalog.PROVISIONING_DIR
    (source,) = yaml.safe_load((prov / "datasources" / "prometheus.yml").read_text())[
        "datasources"]
    assert source["uid"] == catalog.DATASOURCE_UID and source["type"] == "prometheus"
    (provider,) = yaml.safe_load((prov / "dashboards" / "appliance.yml").read_text())[
        "providers"]
    assert provider["folderUid"] == catalog.FOLDER_UID and provider["type"] == "file"


@needs_promtool
def test_promtool_check_config_and_rules():
    done = subprocess.run([PROMTOOL, "check", "config", "prometheus.yml"],
                          cwd=catalog.PROMETHEUS_DIR, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    done = subprocess.run([PROMTOOL, "check", "rules", "rules.yml"],
                          cwd=catalog.PROMETHEUS_DIR, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 27 rules found" in done.stdout


@needs_promtool
def test_promtool_unit_tests_fire_each_alert_on_bad_series_and_not_on_healthy():
    rules = yaml.safe_load((catalog.PROMETHEUS_DIR / "rules.yml").read_text())
    alerts = {r["alert"] for g in rules["groups"] for r in g["rules"] if "alert" in r}
    tests = yaml.safe_load((catalog.PROMETHEUS_DIR / "rules_test.yml").read_text())
    fired = [{t["alertname"] for t in group["alert_rule_test"] if t["exp_alerts"]}
             for group in tests["tests"]]
    silent = [{t["alertname"] for t in group["alert_rule_test"] if not t["exp_alerts"]}
              for group in tests["tests"]]
    assert alerts == {"ApplianceAlertLatencyHigh", "ApplianceLatencyBudgetBurn",
                      "ApplianceEventsWaiting", "ApplianceQueryDown", "AppliancePairNoStandby",
                      "ApplianceQueryStalled",
                      "ApplianceDeadLettersArriving", "ApplianceRulesReloadRejected",
                      "BrokerDown", "BrokerLogEvictedUnread", "BrokerLogBudgetFull",
                      "SparkWorkerLost", "NodeFilesystemAlmostFull",
                      "NodeMemoryLow", "NodeClockSkew", "Watchdog"}
    # every alert fires, and stays quiet (but the Watchdog, which always fires)
    assert fired[0] == alerts and silent[1] == alerts - {"Watchdog"}
    done = subprocess.run([PROMTOOL, "test", "rules", "rules_test.yml"],
                          cwd=catalog.PROMETHEUS_DIR, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


@needs_promtool
@pytest.mark.parametrize(("alert", "good", "bad"), [
    # A BrokerDown that can never fire.
    ("BrokerDown", 'expr: up{job="broker"} == 0', 'expr: up{job="broker"} == 2'),
    # The lag alert on records it replaced: silent while the oldest event ages.
    ("ApplianceEventsWaiting", "max by (job, instance, topic) (appliance_consumer_lag_seconds)",
     "max by (job, instance, topic) (appliance_consumer_lag)"),
])
def test_promtool_unit_tests_notice_a_broken_rule(tmp_path, alert, good, bad):
    """The unit tests fail on a rule that cannot fire (they can fail)."""
    rules = (catalog.PROMETHEUS_DIR / "rules.yml").read_text()
    broken = rules.replace(good, bad)
    assert broken != rules
    (tmp_path / "rules.yml").write_text(broken)
    shutil.copy(catalog.PROMETHEUS_DIR / "rules_test.yml", tmp_path)
    done = subprocess.run([PROMTOOL, "test", "rules", "rules_test.yml"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and alert in done.stdout + done.stderr
