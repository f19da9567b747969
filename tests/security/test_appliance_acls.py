"""The appliance under the least ACLs it needs, on a broker that denies everything else.

``appliance broker --authorizer acl`` with SASL users; the appliance's principal is
granted exactly the set docs/broker.md documents (READ on ``events``, WRITE on ``alerts``
and ``events.dlq``; DESCRIBE follows from those) with ``appliance broker-user acl add``
before the broker starts, and nothing else. The load generator's principal is a super
user (its own needs are not under test here). Every expected alert and dead letter must
arrive; meanwhile the broker's log shows what the appliance was refused, if anything,
which must be nothing but the optional alert-latency reader (READ on ``alerts``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from appliance.broker import EmbeddedBroker
from appliance.broker.security.credentials import add_user
from appliance.process.logwatch import log_events, wait_for_event

from support.child_env import child_env
from support.secure_helpers import (
    broker_args,
    new_password,
    secured_appliance_config,
    write_private,
)

pytestmark = [pytest.mark.spark, pytest.mark.timeout(1800)]

ROOT = Path(__file__).resolve().parents[2]
TOPICS = "events:2,alerts:1,events.dlq:1"
MECHANISM = "SCRAM-SHA-512"
# The appliance's whole grant: the documented minimal set.
APPLIANCE_ACLS = [("READ", "events"), ("WRITE", "alerts"), ("WRITE", "events.dlq")]


def test_the_appliance_runs_on_read_events_write_alerts_and_dead_letters(tmp_path):
    passwords = {"appliance": new_password(), "loadgen": new_password()}
    users = tmp_path / "users.toml"
    for user, password in passwords.items():
        add_user(users, user, password, (MECHANISM,))
    data = tmp_path / "broker-data"
    data.mkdir()
    for op, topic in APPLIANCE_ACLS:
        done = subprocess.run(
            [sys.executable, "-m", "appliance", "broker-user", "acl", "add", "--data-dir",
             str(data), "--allow-principal", "User:appliance", "--operation", op,
             "--topic", topic], capture_output=True, text=True, timeout=60, env=child_env())
        assert done.returncode == 0, done.stderr
    granted = json.loads((data / "acls.json").read_text())["acls"]
    assert len(granted) == len(APPLIANCE_ACLS)
    (tmp_path / "rules.yml").write_text((ROOT / "examples" / "rules.yml").read_text())
    logs = tmp_path / "logs"
    logs.mkdir()
    broker = EmbeddedBroker(data_dir=data, log_path=logs / "broker.log", extra_args=[
        *broker_args("SASL_PLAINTEXT", users=users, mechanisms=MECHANISM),
        "--topics", TOPICS, "--authorizer", "acl", "--super-users", "User:loadgen"]).start()
    procs: list[subprocess.Popen] = []
    try:
        config = secured_appliance_config(tmp_path / "appliance.toml", broker.bootstrap, {
            "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": MECHANISM,
            "sasl.username": "appliance"})
        app_log = logs / "appliance.log"
        with app_log.open("wb") as out:
            app = subprocess.Popen(
                [sys.executable, "-m", "appliance", "run", "--config", str(config)],
                stdout=out, stderr=subprocess.STDOUT, cwd=tmp_path, start_new_session=True,
                env=child_env(APPLIANCE_KAFKA_SASL_PASSWORD=passwords["appliance"]))
        procs.append(app)
        wait_for_event(app_log, "appliance.ready", app, 600)

        jaas = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
                f'username="loadgen" password="{passwords["loadgen"]}";')
        lg_settings = write_private(tmp_path / "loadgen.toml", f"""
[kafka]
"security.protocol" = "SASL_PLAINTEXT"
"sasl.mechanism" = "{MECHANISM}"
"sasl.jaas.config" = '{jaas}'
""")
        report = tmp_path / "report.json"
        lg = subprocess.run(
            [sys.executable, "-m", "loadgen", "run", "--bootstrap", broker.bootstrap,
             "--rate", "200", "--duration", "5", "--alert-ratio", "0.2",
             "--bad-ratio", "0.05", "--floor-seconds", "0", "--grace", "400",
             "--kafka-config", str(lg_settings), "--quiet", "--report", str(report)],
            capture_output=True, text=True, timeout=900, cwd=tmp_path, env=child_env())
        assert lg.returncode == 0, (lg.stderr[-2000:] + "\n--- appliance log tail:\n"
                                    + app_log.read_text(errors="replace")[-6000:])
        summary = json.loads(lg.stdout)
        print(f"under minimal ACLs: {summary['sent']} events, {summary['received_alerts']} "
              f"of {summary['expected_alerts']} alerts, {summary['dlq_received']} of "
              f"{summary['dlq_expected']} dead letters")
        assert summary["lost"] == 0
        assert summary["received_alerts"] == summary["expected_alerts"] > 0
        assert summary["dlq_received"] == summary["dlq_expected"] > 0

        app.send_signal(signal.SIGTERM)
        assert app.wait(timeout=120) == 0
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)
        broker.stop()

    denied = [e for e in log_events(logs / "broker.log")
              if e.get("event") == "broker.authorization_denied"
              and e.get("principal") == "User:appliance"]
    refused = {(e["api"], e["operation"], e["resource_type"], e["resource_name"])
               for e in denied}
    print(f"refused to the appliance: {sorted(refused)}")
    assert refused <= {("Fetch", "READ", "TOPIC", "alerts"),
                       ("Metadata", "DESCRIBE", "TOPIC", "alerts")}, refused
