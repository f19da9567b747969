"""kill -9 of ``appliance run`` (Python process and JVM) at random moments, several rounds
in a row, each restart on the same checkpoint, under a steady open-loop load: no
alerting event may be left without an alert. Duplicates are counted, not forbidden."""

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

ROUNDS = knob(2, 6)
RATE = knob(200.0, 2000.0)
KILL_WINDOW_S = (0.5, 8.0)  # after the restarted appliance says ready


@pytest.mark.parametrize("trigger", [
    pytest.param("continuous", marks=pytest.mark.faults_long),
    "realtime",  # the trigger that crash-looped before appliance.query.checkpoint
    pytest.param("microbatch", marks=pytest.mark.faults_long),
])
def test_kill_9_rounds_lose_nothing(trigger, broker, fault_topics, tmp_path, rng):
    topics = fault_topics()
    rules = tmp_path / "rules.yml"
    rules.write_text(rules_yaml())
    config = write_config(tmp_path, broker.bootstrap, topics, trigger,
                          tmp_path / "checkpoint", rules)
    procs: list[ApplianceProcess] = []
    recoveries: dict[str, float] = {}
    ready_after: list[float] = []
    try:
        # Enough load to span the rounds (restarts take tens of seconds on a busy box).
        # The first kill may land before batch/epoch 0 is committed, as in the issue.
        load = LoadThread(broker.bootstrap, topics, RATE, duration=ROUNDS * 20.0).start()
        procs.append(ApplianceProcess(config, tmp_path / "run-0.log"))
        procs[-1].wait_for("appliance.ready")
        wait_for_records(broker.bootstrap, topics["events"])
        for n in range(1, ROUNDS + 1):
            time.sleep(rng.uniform(*KILL_WINDOW_S))
            procs[-1].kill()
            restarted = time.time()
            recoveries[f"round {n}"] = restarted
            procs.append(ApplianceProcess(config, tmp_path / f"run-{n}.log"))
            procs[-1].wait_for("appliance.ready")
            ready_after.append(time.time() - restarted)
        procs[-1].wait_for("query.processing")
        report = load.join(timeout=1500)
        assert report.send_failed == 0
        result = account_alerts(broker.bootstrap, topics["alerts"], load.factory, report.sent,
                                recoveries)
        print(result.line(f"kill -9 x{ROUNDS} {trigger} at {RATE:g}/s") +
              f"; ready after restart {', '.join(f'{s:.1f} s' for s in ready_after)}; "
              f"repairs {sum(p.text().count('checkpoint.repaired') for p in procs)}")
        assert result.lost == [], result.lost[:20]
        assert report.lost == 0  # the load generator's own collector agrees
        assert procs[-1].terminate() == 0
    finally:
        for proc in procs:
            proc.cleanup()
