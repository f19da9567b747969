"""Dashboards, scrape config and rules as files: fresh, valid, unit-tested with promtool."""

from __future__ import annotations

import shutil
import subprocess

import pytest
import yaml

from dashboards import build, catalog

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
                 "lag (records)", "lag (seconds", "Query up", "Trigger", "Restarts"):
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
                                               "uid": catalog.DATASOURCE_UID}
                assert panel["targets"], panel["title"]


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
    assert "SUCCESS: 12 rules found" in done.stdout


@needs_promtool
def test_promtool_unit_tests_fire_each_alert_on_bad_series_and_not_on_healthy():
    rules = yaml.safe_load((catalog.PROMETHEUS_DIR / "rules.yml").read_text())
    alerts = {r["alert"] for g in rules["groups"] for r in g["rules"] if "alert" in r}
    tests = yaml.safe_load((catalog.PROMETHEUS_DIR / "rules_test.yml").read_text())
    fired = [{t["alertname"] for t in group["alert_rule_test"] if t["exp_alerts"]}
             for group in tests["tests"]]
    silent = [{t["alertname"] for t in group["alert_rule_test"] if not t["exp_alerts"]}
              for group in tests["tests"]]
    assert alerts == {"ApplianceAlertLatencyHigh", "ApplianceConsumerLagGrowing",
                      "ApplianceQueryDown", "ApplianceQueryStalled",
                      "ApplianceDeadLettersArriving", "BrokerDown"}
    assert fired[0] == alerts and silent[1] == alerts  # every alert: fires, and stays quiet
    done = subprocess.run([PROMTOOL, "test", "rules", "rules_test.yml"],
                          cwd=catalog.PROMETHEUS_DIR, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr



@needs_promtool
def test_promtool_unit_tests_notice_a_broken_rule(tmp_path):
    """A BrokerDown that can never fire makes the unit tests fail (they can fail)."""
    rules = (catalog.PROMETHEUS_DIR / "rules.yml").read_text()
    broken = rules.replace('expr: up{job="broker"} == 0', 'expr: up{job="broker"} == 2')
    assert broken != rules
    (tmp_path / "rules.yml").write_text(broken)
    shutil.copy(catalog.PROMETHEUS_DIR / "rules_test.yml", tmp_path)
    done = subprocess.run([PROMTOOL, "test", "rules", "rules_test.yml"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "BrokerDown" in done.stdout + done.stderr
