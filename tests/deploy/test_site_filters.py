"""The deploy's filter plugins as plain functions: the findings the preflight prints, the
Spark UIs' token, the web config's hashes, the rules and runbooks as the site runs them."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import subprocess
from pathlib import Path

import bcrypt
import pytest
import yaml

from support.deploy.deploy_bed import role_plugin

ROLES = Path(__file__).resolve().parents[2] / "ansible" / "roles"
REPO = ROLES.parents[1]


site_checks = role_plugin("site", "site_checks")
web_auth = role_plugin("site", "web_auth")
alert_rules = role_plugin("monitoring", "alert_rules")


def test_weak_secrets_names_placeholders_and_short_values_never_the_values():
    found = site_checks.weak_secrets(
        {"spark_auth_secret": "change-me-please-now", "kafka_passwords": {
            "admin": "x" * 12, "loadgen": "tiny"}, "monitoring_web_password": ""},
        {"spark_auth_secret": 16, "kafka_passwords.*": 12, "monitoring_web_password": 12})
    assert found == ["spark_auth_secret is still the example vault's placeholder",
                     "kafka_passwords.loadgen is shorter than 12 characters"]
    assert site_checks.weak_secrets({"kafka_passwords": "oops"}, {"kafka_passwords.*": 12}) \
        == ["kafka_passwords must be a mapping of name to secret"]


def test_disagreements_name_each_value_with_its_hosts_and_hide_secrets():
    views = {"a": {"t": "x", "s": "one"}, "b": {"t": "y", "s": "one"},
             "c": {"t": "x", "s": "two"}}
    found = site_checks.disagreements(views, ["t"], ["s"])
    assert found == [
        't differs across hosts ("x" on a, c; "y" on b): set it once, for every host '
        "(group_vars/all)",
        "s differs across hosts (value 1 on a, b; value 2 on c): set it once, for every "
        "host (group_vars/all)"]
    assert site_checks.disagreements({"a": {"t": 1}, "b": {"t": 1}}, ["t"]) == []


def test_the_spark_ui_token_is_a_jws_the_derived_key_signs():
    secret = "a-test-secret-of-32-characters.."
    key = base64.urlsafe_b64decode(web_auth.spark_ui_key(secret) + "=")
    assert len(key) * 8 >= 256  # jjwt refuses weaker HMAC keys
    header, payload, signature = web_auth.spark_ui_token(secret).split(".")
    assert json.loads(base64.urlsafe_b64decode(header + "==")) == {"alg": "HS256",
                                                                   "typ": "JWT"}
    expected = hmac.new(key, f"{header}.{payload}".encode(), hashlib.sha256).digest()
    assert base64.urlsafe_b64decode(signature + "=") == expected
    assert web_auth.spark_ui_token("another-secret-of-32-characters") != \
        web_auth.spark_ui_token(secret)


def test_a_web_password_hash_is_kept_while_the_password_matches():
    first = web_auth.web_password_hash("a-web-password")
    assert bcrypt.checkpw(b"a-web-password", first.encode())
    assert web_auth.web_password_hash("a-web-password", first) == first
    changed = web_auth.web_password_hash("another-password", first)
    assert changed != first and bcrypt.checkpw(b"another-password", changed.encode())
    assert web_auth.web_password_hash("x", "not-a-hash") != "not-a-hash"


def test_site_rules_make_runbook_links_absolute_and_override_a_trigger_target(tmp_path):
    text = (REPO / "dashboards" / "prometheus" / "rules.yml").read_text()
    base = "http://10.0.0.9:9090/consoles/runbooks.html"
    doc = yaml.safe_load(alert_rules.site_alert_rules(text, base, {"microbatch": 5.0}))
    rules = [r for g in doc["groups"] for r in g["rules"]]
    links = [r["annotations"]["runbook_url"] for r in rules if "alert" in r]
    assert links and all(link.startswith(base + "#") for link in links)
    targets = {r["labels"]["trigger"]: r for r in rules
               if r.get("record") == "appliance:alert_latency_target_seconds"}
    assert targets["microbatch"]["labels"]["le"] == "5.0"
    assert targets["microbatch"]["expr"].startswith("5 * group by")
    assert targets["continuous"]["labels"]["le"] == "0.1"  # not overridden
    out = tmp_path / "rules.yml"
    out.write_text(yaml.safe_dump(doc))
    check = subprocess.run(["promtool", "check", "rules", str(out)], capture_output=True,
                           text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    with pytest.raises(alert_rules.TargetError, match="0.35 s is not a bucket"):
        alert_rules.site_alert_rules(text, base, {"continuous": 0.35})
    with pytest.raises(alert_rules.TargetError, match="no trigger"):
        alert_rules.site_alert_rules(text, base, {"batch": 1.0})


def test_the_runbooks_page_has_an_anchor_per_alert_and_no_template_action():
    page = alert_rules.runbooks_html((REPO / "docs" / "runbooks.md").read_text())
    rules = yaml.safe_load((REPO / "dashboards" / "prometheus" / "rules.yml").read_text())
    for rule in (r for g in rules["groups"] for r in g["rules"] if "alert" in r):
        anchor = rule["annotations"]["runbook_url"].split("#", 1)[1]
        assert f'id="{anchor}"' in page, anchor
    assert "<pre>" in page
    page = alert_rules.runbooks_html("# T\n\nuse {{ $value }} here\n")
    assert "{{ $value" not in page and '{{ "{{" }} $value' in page
