"""kill -9 of the durable broker (``appliance broker --data-dir``) for a while, then a
restart on the same directory and port, under a steady open-loop load.

The load generator re-sends what the broker did not acknowledge; the appliance either
rides the outage out or exits 1, and this test restarts it as a supervisor (systemd's
``Restart=on-failure``) would. Nothing acknowledged may be lost.
"""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from appliance.broker import EmbeddedBroker
from loadgen.config import LoadConfig
from loadgen.run import run_floor

from support.appliance_process import ApplianceProcess
from support.faults.fault_accounting import account_alerts
from support.faults.fault_kafka import wait_for_records
from support.faults.fault_knobs import knob
from support.faults.fault_process import write_config
from support.faults.loadrun import LoadThread, rules_yaml

OUTAGE_S = knob(12.0, 30.0)  # > the producer's message.timeout.ms (10 s): retries needed
RATE = knob(200.0, 2000.0)


@pytest.fixture
def durable_broker(tmp_path):
    b = EmbeddedBroker(data_dir=tmp_path / "broker-data", log_path=tmp_path / "broker.log")
    b.start()
    yield b
    b.stop()


def topics_on(b: EmbeddedBroker) -> dict[str, str]:
    tag = uuid.uuid4().hex[:8]
    topics = {"events": f"ev-{tag}", "alerts": f"al-{tag}", "dead_letters": f"dl-{tag}"}
    b.create_topics({topics["events"]: 2, topics["alerts"]: 1, topics["dead_letters"]: 1})
    return topics


def test_load_generator_resends_what_a_dead_broker_did_not_acknowledge(
        durable_broker, tmp_path):
    """No appliance: produce and read back one topic across a broker kill -9 + restart."""
    config = LoadConfig(bootstrap=durable_broker.bootstrap, rate=RATE, duration=OUTAGE_S + 8,
                        grace=60.0, progress=False, floor_topic=f"floor-{uuid.uuid4().hex[:6]}")
    durable_broker.create_topics({config.floor_topic: 2})
    box: dict = {}
    thread = threading.Thread(target=lambda: box.update(report=run_floor(config)), daemon=True)
    thread.start()
    wait_for_records(durable_broker.bootstrap, config.floor_topic)
    time.sleep(1.0)
    durable_broker.kill()
    time.sleep(OUTAGE_S)
    durable_broker.start()
    thread.join(OUTAGE_S + 200)
    assert not thread.is_alive()
    report = box["report"]
    print(f"loadgen across a {OUTAGE_S:g} s broker outage: sent {report.sent} re-sent "
          f"{report.resent} failed {report.send_failed} lost {report.lost} "
          f"duplicates {report.duplicates}")
    assert report.resent > 0  # the outage outlasted message.timeout.ms: retries were needed
    assert report.send_failed == 0 and report.lost == 0


@pytest.mark.spark
@pytest.mark.timeout(2400)
@pytest.mark.parametrize("trigger", [
    "continuous",
    pytest.param("realtime", marks=pytest.mark.faults_long),
    pytest.param("microbatch", marks=pytest.mark.faults_long),
])
def test_broker_kill_9_and_restart_loses_nothing(trigger, durable_broker, tmp_path, rng):
    topics = topics_on(durable_broker)
    rules = tmp_path / "rules.yml"
    rules.write_text(rules_yaml())
    config = write_config(tmp_path, durable_broker.bootstrap, topics, trigger,
                          tmp_path / "checkpoint", rules)
    procs = [ApplianceProcess(config, tmp_path / "run-0.log")]
    exits: list[int] = []
    try:
        procs[-1].wait_for("query.processing")
        load = LoadThread(durable_broker.bootstrap, topics, RATE,
                          duration=OUTAGE_S + 20.0).start()
        wait_for_records(durable_broker.bootstrap, topics["events"])
        time.sleep(rng.uniform(1.0, 5.0))
        durable_broker.kill()
        down_at = time.time()
        time.sleep(OUTAGE_S)
        durable_broker.start()
        back_at = time.time()
        # Supervise until the load run is over: a 1 means "restart me", anything else fails.
        deadline = time.monotonic() + OUTAGE_S + 600
        while load.running() and time.monotonic() < deadline:
            code = procs[-1].proc.poll()
            if code is not None:
                exits.append(code)
                assert code == 1, procs[-1].text()[-3000:]
                procs.append(ApplianceProcess(config, tmp_path / f"run-{len(procs)}.log"))
            time.sleep(0.5)
        report = load.join(timeout=1500)
        assert report.send_failed == 0
        result = account_alerts(durable_broker.bootstrap, topics["alerts"], load.factory,
                                report.sent, {"broker back": back_at})
        print(result.line(f"broker kill -9 for {OUTAGE_S:g} s, {trigger} at {RATE:g}/s") +
              f"; appliance exits {exits or 'none (rode it out)'}; load re-sent "
              f"{report.resent}; broker down at +{down_at - report.schedule_start_epoch:.1f} s "
              f"of the schedule")
        assert result.lost == [], result.lost[:20]
        assert report.lost == 0
    finally:
        for proc in procs:
            proc.cleanup()
