"""Consumer groups with the Java kafka-clients 3.9.1: members as real JVMs."""

from __future__ import annotations

from functools import partial

import pytest
from group_harness import java_member, run_group_lifecycle

pytestmark = pytest.mark.java


def test_java_group_lifecycle(tmp_path, java_checks):
    report = run_group_lifecycle(tmp_path, partial(java_member, java_checks),
                                 "cooperative-sticky", "java")
    print(f"\njava: join rebalance {report.join_rebalance_s:.1f} s, crash reassigned "
          f"in {report.crash_reassign_s:.1f} s, generations {report.generations}")
