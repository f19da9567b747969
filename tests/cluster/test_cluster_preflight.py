"""Too few task slots on the cluster: exit 2 with one line naming both numbers.

Continuous and real-time queries hold a slot per input partition; the count is what the
master granted *this* application, once its executors registered (bounded wait).
"""

from __future__ import annotations

import time

import pytest

from support.appliance_mix import MIX_RULES
from support.appliance_process import ApplianceProcess
from support.cluster.cluster_config import write_cluster_config

pytestmark = [pytest.mark.spark, pytest.mark.cluster, pytest.mark.timeout(1800)]


@pytest.mark.parametrize("partitions, spark, granted", [
    (9, {}, 4),                          # the whole 4-core cluster is not enough
    (4, {"spark.cores.max": "3"}, 3),    # the cluster has 4 cores, this application 3
], ids=["9-partitions-4-cores", "cores-max-3"])
def test_too_few_cores_exits_2_naming_partitions_and_granted_cores(
        partitions, spark, granted, spark_cluster, broker, new_topic, tmp_path):
    topics = {"events": new_topic(partitions), "alerts": new_topic(1),
              "dead_letters": new_topic(1)}
    config = write_cluster_config(
        tmp_path, spark_cluster, broker.bootstrap, topics, "continuous", MIX_RULES,
        spark={"spark.scheduler.maxRegisteredResourcesWaitingTime": "20s", **spark})
    started = time.monotonic()
    proc = ApplianceProcess(config, tmp_path / "run.log")
    try:
        code = proc.proc.wait(timeout=900)
    finally:
        proc.cleanup()
    elapsed = time.monotonic() - started
    output = proc.log.read_text(errors="replace")
    assert code == 2, output[-4000:]
    problems = [line for line in output.splitlines() if not line.startswith(("{", " "))
                and "task slot" in line]
    assert len(problems) == 1, output[-4000:]
    assert (f"has {partitions} partitions but {spark_cluster.master_url} (cores granted to "
            f"this application) gives {granted} slots") in problems[0]
    waited = [e for e in proc.events() if e.get("event") == "spark.executors"]
    assert waited and waited[0]["slots"] == granted and waited[0]["needed"] == partitions
    print(f"\npreflight: exit 2 after {elapsed:.1f}s ({waited[0]['waited_s']}s waiting "
          f"for executors): {problems[0]}")
