"""Lambda rules on the standalone cluster: an executor's tasks share its JVM's rules.

Executors in their own JVMs fetch the driver's rules version once (over Spark RPC) and
their tasks share it, as tasks in one local JVM do; each task must still evaluate a rule
that keeps state (a lambda's variable) on a copy of its own. One executor of two cores runs
two tasks at once over events alternating hot and cold (``tests/support/lambda_rules.py``): the rule
book must match what the plan-compiled query matches, event for event.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from support import lambda_rules
from support.child_env import child_env
from support.lambda_rules import LAMBDA_RULES

pytestmark = [pytest.mark.spark, pytest.mark.cluster, pytest.mark.timeout(900)]

SCRIPT = Path(lambda_rules.__file__).resolve()  # also a program, run by path


def test_lambda_rules_in_an_executors_concurrent_tasks_match_what_spark_matches(
        spark_cluster):
    per_partition, partitions = 30_000, 4
    run = subprocess.run([sys.executable, str(SCRIPT), spark_cluster.master_url,
                          str(per_partition), str(partitions)],
                         env=child_env(), capture_output=True, text=True, timeout=800)
    assert run.returncode == 0, run.stderr[-3000:]
    found = json.loads(run.stdout.strip().splitlines()[-1])
    expected = {f"l{i}": per_partition * partitions // 2 for i in range(len(LAMBDA_RULES))}
    assert found["naive"] == expected
    assert found["book"] == expected
