"""The churn bench's open-loop producer, run as its own process.

    python -m bench._paced_producer BOOTSTRAP TOPIC PARTITIONS RATE

Record ``i`` is due at ``i / RATE`` seconds (``loadgen.schedule.Schedule``, the load
generator's timing math) and goes to partition ``i % PARTITIONS``, so every partition gets
the same steady stream whoever consumes it. Its value carries ``i`` and its send time
(``bench._churn_member.VALUE``); the producer sends what is due, then sleeps until the next
record is, at least ``MIN_SLEEP_S`` (never spins: two cores are shared with the broker and
the members), and counts records sent over ``LATE_S`` late rather than quietly sending
slower.

Runs until SIGTERM, then flushes and prints one line: ``SENT <n> LATE <n> FAILED <n>``
(FAILED: deliveries the broker never acknowledged; the bench's loss check needs 0).
"""

from __future__ import annotations

import signal
import sys
import time

import confluent_kafka as ck

from bench._churn_member import VALUE
from loadgen.schedule import Schedule

PAD = bytes(48)  # 64-byte values
FOREVER_S = 24 * 3600.0
MAX_SLEEP_S = 0.05
MIN_SLEEP_S = 0.001  # at 10,000/s: bursts of ~10 records
LATE_S = 0.002


def run(bootstrap: str, topic: str, partitions: int, rate: float) -> int:
    # A flag, not a threading.Event: Event.set() from a handler that interrupted
    # Event.wait() in the same thread can deadlock on the event's own lock (one run in
    # eighteen hung until it was killed).
    stopping: list[int] = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(1))
    schedule = Schedule(rate=rate, duration=FOREVER_S)
    failed = 0

    def delivered(err, _msg) -> None:
        nonlocal failed
        if err is not None:
            failed += 1

    producer = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 1, "acks": "all",
                            "enable.idempotence": True, "on_delivery": delivered})
    # One record acknowledged before the clock starts: connecting is not part of the run.
    producer.produce(topic, VALUE.pack(-1, time.time_ns()) + PAD, partition=0)
    producer.flush(30)
    sent = late = 0
    start = time.monotonic()
    while not stopping:
        elapsed = time.monotonic() - start
        due = int(schedule.due_by(elapsed))
        while sent < due:
            if elapsed - sent / rate > LATE_S:
                late += 1
            try:
                producer.produce(topic, VALUE.pack(sent, time.time_ns()) + PAD,
                                 partition=sent % partitions)
            except BufferError:  # the local queue is full: serve callbacks, try again
                producer.poll(0.01)
                continue
            sent += 1
        producer.poll(0)
        next_due = (sent + 1) / rate
        time.sleep(min(max(next_due - (time.monotonic() - start), MIN_SLEEP_S), MAX_SLEEP_S))
    left = producer.flush(60)
    print(f"SENT {sent} LATE {late} FAILED {failed + left}", flush=True)
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 5:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        sys.exit(2)
    sys.exit(run(sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])))
