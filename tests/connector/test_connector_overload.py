"""Overload: a micro-batch query with the adaptive read limit (``maxOffsetsPerTrigger=auto``)
fed at twice the rate it sustains. The backlog must stay in Kafka (memory bounded), nothing
acknowledged may be lost, and once the input falls back (to a quarter of the sustainable
rate, then half of it) the lag must come back near zero. Figures (driver and broker RSS
peaks, drain time, latency before and after) are printed and written, with a plot of rate,
lag, latency and memory over time, to
``reports/overload/connector_overload_<seconds>s.{json,png}``; only the loss and the drain
are asserted.

The sustainable rate is measured first, in the same run, from the query's own progress on a
backlog (loadgen.overload.run_scenario). The query does real per-row work (a predicate that
iterates, like a costly alert rule) so that rate stays small enough for one Python producer
to double on a shared machine.

``make test`` runs a short overload (10 s); ``make faults-overload`` the 60 s variant
(``CONNECTOR_OVERLOAD_SECONDS=60``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from loadgen.overload import OverloadRun, Scenario, run_scenario, start_costly_relay, write_png

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
OVERLOAD_S = float(os.environ.get("CONNECTOR_OVERLOAD_SECONDS", "10"))
ADAPTIVE = {"maxOffsetsPerTrigger": "auto", "adaptiveTargetBatchDuration": "2s",
            "adaptiveInitialOffsetsPerSecond": "500"}


def test_twice_the_sustainable_rate_loses_nothing_and_the_lag_drains(spark, broker, new_topic,
                                                                     checkpoint, queries):
    src, out = new_topic(2), new_topic(2)
    driver_pid = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
    run = OverloadRun(broker.bootstrap, src, out, 2,
                      watch={"driver": driver_pid, "broker": broker.proc.pid})

    def start():
        queries.append(start_costly_relay(spark, broker.bootstrap, src, out, checkpoint,
                                          ADAPTIVE))

    scenario = Scenario(overload_s=OVERLOAD_S)
    report, drained = run_scenario(run, scenario, start, lambda: queries[-1].recentProgress,
                                   lambda: queries[-1].exception())
    queries[-1].stop()

    figures = report.summary()
    outdir = ROOT / "reports" / "overload"
    outdir.mkdir(parents=True, exist_ok=True)
    stem = outdir / f"connector_overload_{int(OVERLOAD_S)}s"
    stem.with_suffix(".json").write_text(json.dumps(figures, indent=2))
    write_png(report, stem.with_suffix(".png"), f"maxOffsetsPerTrigger=auto, {int(OVERLOAD_S)} s "
              f"at 2 x {figures['sustainable_rate']}/s")
    print("overload figures:", json.dumps(figures))

    # The scenario must really overload: at exactly twice the calibrated rate the overload
    # leaves about that rate times its seconds behind; a query that keeps up leaves none.
    assert figures["overload_max_lag"] >= figures["sustainable_rate"] * OVERLOAD_S / 4, (
        f"the overload left no backlog: the calibration underrated the query: {figures}")
    assert report.lost == 0, f"{report.lost} acknowledged records never came out: {figures}"
    assert drained is not None, (f"lag did not fall to {figures['near_zero_lag']} within "
                                 f"{scenario.drain_bound_s:.0f} s: {figures}")
