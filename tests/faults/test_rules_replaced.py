"""The rules file replaced by a broken one while the appliance runs, and nobody asks for a
reload: the running appliance keeps going on the rules it read (a reload request would
reject the file: test_rules_reload.py); a restart refuses with exit 2 and one line naming
the file; alerts from before are not lost, and once the file is fixed the restart catches
up on what arrived meanwhile."""

from __future__ import annotations

import time

import pytest

from support.appliance_process import ApplianceProcess
from support.faults.fault_accounting import account_alerts
from support.faults.fault_kafka import wait_for_records
from support.faults.fault_knobs import knob
from support.faults.fault_process import write_config
from support.faults.loadrun import LoadThread, rules_yaml

# Several JVM starts per test: minutes each on a loaded 2-core box (the suite-wide
# pytest timeout is 600 s).
pytestmark = [pytest.mark.spark, pytest.mark.timeout(2400)]

RATE = knob(200.0, 2000.0)
BROKEN = "rules:\n  - id: Not-An-Id\n    severity: loud\n    when: \"value >\"\n"


def test_broken_rules_file_keeps_the_runner_and_blocks_the_restart(
        broker, fault_topics, tmp_path):
    topics = fault_topics()
    rules = tmp_path / "rules.yml"
    good = rules_yaml()
    rules.write_text(good)
    config = write_config(tmp_path, broker.bootstrap, topics, "continuous",
                          tmp_path / "checkpoint", rules)
    procs = [ApplianceProcess(config, tmp_path / "run-0.log")]
    try:
        procs[-1].wait_for("query.processing")
        load = LoadThread(broker.bootstrap, topics, RATE, duration=knob(20.0, 60.0)).start()
        wait_for_records(broker.bootstrap, topics["events"])
        # Replaced the way editors and config management do it: a new file renamed over.
        tmp = rules.with_suffix(".new")
        tmp.write_text(BROKEN)
        tmp.replace(rules)
        report = load.join(timeout=1500)  # the whole run, with the broken file in place
        assert procs[-1].proc.poll() is None, procs[-1].text()[-3000:]
        assert procs[-1].find("query.failed") is None
        result = account_alerts(broker.bootstrap, topics["alerts"], load.factory, report.sent)
        print(result.line("rules replaced by a broken file, still running"))
        assert result.lost == [] and report.lost == 0
        assert procs[-1].terminate() == 0

        refused = ApplianceProcess(config, tmp_path / "run-1.log")
        procs.append(refused)
        assert refused.wait_exit(timeout=120) == 2
        errors = [line for line in refused.text().splitlines() if str(rules) in line]
        assert errors and "rule" in errors[0], refused.text()[-2000:]
        assert refused.find("spark.ready") is None  # refused before starting Spark

        # Events arriving while it is down, then the file is fixed: nothing is lost.
        later = LoadThread(broker.bootstrap, topics, RATE, duration=5.0, grace=300.0).start()
        time.sleep(1.0)
        rules.write_text(good)
        restarted = time.time()
        procs.append(ApplianceProcess(config, tmp_path / "run-2.log"))
        later_report = later.join(timeout=1500)
        after = account_alerts(broker.bootstrap, topics["alerts"], later.factory,
                               later_report.sent, {"fixed restart": restarted}, timeout=180)
        print(after.line("events sent while refused, after the fix"))
        assert after.lost == [], after.lost[:20]
        # ...and the first run's alerts are all still there.
        again = account_alerts(broker.bootstrap, topics["alerts"], load.factory, report.sent,
                               timeout=30)
        assert again.lost == []
        assert procs[-1].terminate() == 0
    finally:
        for proc in procs:
            proc.cleanup()
