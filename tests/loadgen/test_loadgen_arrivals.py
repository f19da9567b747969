"""ArrivalClock: the two recovery figures from alerts read off a real broker."""

from __future__ import annotations

import json
import time

import pytest

from loadgen.arrivals import ArrivalClock

from support.kafka_io import produce

pytestmark = pytest.mark.timeout(60)


def _alert(ts_s: float) -> bytes:
    return json.dumps({"alert_id": f"a-{ts_s}", "ts": ts_s * 1000.0}).encode()


def test_first_and_worst_wait_of_events_stamped_after_a_moment(broker, new_topic):
    topic = new_topic(partitions=1)
    with ArrivalClock(broker.bootstrap, topic) as clock:
        fault = time.time() - 30.0
        # All arriving now: an event stamped before the fault (ignored), two after it
        # (1 s and 20 s after: their alerts waited ~29 and ~10 s) and a record without a
        # stamp (skipped).
        produce(broker.bootstrap, topic,
                [_alert(fault - 5), _alert(fault + 1), _alert(fault + 20), b"not json"],
                partitions=1)
        deadline = time.monotonic() + 20
        while len(clock.arrivals) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        first, worst = clock.first_after(fault), clock.worst_after(fault)
    assert len(clock.arrivals) == 3
    assert 30.0 <= first < 35.0                  # arrival (now) minus the fault
    assert 29.0 <= worst < 34.0                  # the longer of the two waits
    assert clock.worst_after(time.time() + 60) is None
    assert clock.first_after(time.time() + 60) is None
