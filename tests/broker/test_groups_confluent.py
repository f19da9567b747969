"""Consumer groups with confluent-kafka (librdkafka): members as real subprocesses."""

from __future__ import annotations

from functools import partial

from group_harness import python_member, run_group_lifecycle


def test_confluent_group_lifecycle(tmp_path):
    report = run_group_lifecycle(tmp_path, partial(python_member, "confluent"),
                                 "cooperative-sticky", "confluent")
    print(f"\nconfluent-kafka: join rebalance {report.join_rebalance_s:.1f} s, crash reassigned "
          f"in {report.crash_reassign_s:.1f} s, generations {report.generations}")
