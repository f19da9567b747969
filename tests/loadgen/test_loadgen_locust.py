"""Locust drives the same load headless and reports both request types in its CSV."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

LOCUST = Path(sys.executable).with_name("locust")


def test_locust_headless_reports_produce_and_end_to_end(lg_bootstrap, lg_topics, relay,
                                                        lg_env, tmp_path):
    env = dict(lg_env.env)
    env.update(LOADGEN_EVENTS_TOPIC=lg_topics["events"],
               LOADGEN_ALERTS_TOPIC=lg_topics["alerts"], LOADGEN_ALERT_RATIO="0.5")
    prefix = tmp_path / "locust"
    proc = subprocess.run(
        [str(LOCUST), "-f", str(lg_env.root / "loadgen" / "locustfile.py"), "--headless",
         "-u", "10", "-r", "5", "-t", "8s", "--host", lg_bootstrap, "--csv", str(prefix),
         "--only-summary", "--exit-code-on-error", "1"],
        capture_output=True, text=True, timeout=90, cwd=lg_env.root, env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    with open(f"{prefix}_stats.csv", newline="") as f:
        rows = {(r["Type"], r["Name"]): r for r in csv.DictReader(f)}
    produce, alerts = rows[("kafka", "produce")], rows[("alert", "end_to_end")]
    assert int(produce["Request Count"]) > 100 and int(produce["Failure Count"]) == 0
    # Half the events match a rule; alerts still in flight at the stop are not counted.
    assert int(alerts["Request Count"]) > 0.3 * int(produce["Request Count"])
    assert 0 < float(alerts["Median Response Time"]) < 5000
