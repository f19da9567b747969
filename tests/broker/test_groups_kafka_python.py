"""Consumer groups with kafka-python: members as real subprocesses (group_harness.py)."""

from __future__ import annotations

from functools import partial

from group_harness import python_member, run_group_lifecycle


def test_kafka_python_group_lifecycle(tmp_path):
    report = run_group_lifecycle(tmp_path, partial(python_member, "kafka-python"), "range",
                                 "kafka-python")
    print(f"\nkafka-python: join rebalance {report.join_rebalance_s:.1f} s, crash reassigned "
          f"in {report.crash_reassign_s:.1f} s, generations {report.generations}")
