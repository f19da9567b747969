"""The embedded broker with the real Java kafka-clients 3.9.1 (the Spark connector's client).

Admin create/describe, idempotent producer (its default) with each compression codec,
consumer with assign from earliest / a given offset / a timestamp / latest, and subscribe()
in a group.
"""

from __future__ import annotations

import pytest

from support.broker.java_programs import run_java

pytestmark = pytest.mark.java


@pytest.mark.parametrize("compression", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_java_client_round_trip(broker, java_checks, compression):
    topic = f"java-{compression}"
    n = 2000 if compression == "none" else 600
    out = run_java(java_checks, "BrokerCheck", broker.bootstrap, topic + "-rt", str(n),
                   compression)
    assert out["ADMIN_TOPIC_LISTED"] == "true"
    assert out["ADMIN_PARTITIONS"] == "2"
    assert out["PRODUCED_OFFSETS_DENSE"] == "true"  # idempotent producer: exactly N, no gaps
    assert out["END_OFFSETS_SUM"] == str(n)
    assert out["BEGIN_OFFSETS"] == "0,0"
    assert out["CONSUMED_EARLIEST"] == str(n)
    assert out["CONSUMED_BAD"] == "0"
    first, expected = out["SEEK_FIRST_OFFSET"].split(" expected=")
    assert first == expected
    got, expected = out["OFFSET_FOR_TIME"].split(" expected=")
    assert got == expected
    assert out["LATEST_POSITION"] == str(n // 2)
    assert out["LATEST_VALUE"] == f"late-value offset={n // 2}"
    # partition 1 holds records 1, 3, 5...: record 2k+1 has timestamp BASE_TS + 2k + 1,
    # so the first at or after BASE_TS + 21 is record 21, partition-1 offset 10
    assert out["ADMIN_LIST_OFFSETS"] == f"0,{n // 2},10"
    assert out["GROUP_START_POSITION"] == "0"  # nothing committed: auto.offset.reset
    assert out["GROUP_RESUMED_POSITION"] == "5"
    assert out["GROUP_COMMITTED"] == "5,meta"
    assert out["SUBSCRIBE_ASSIGNED"] == "2"  # subscribe(): the group owns both partitions
    assert out["SUBSCRIBE_FIRST_OFFSET"] == "5"  # ...and partition 0 resumes at the commit
    assert out["DONE"] == "true"
