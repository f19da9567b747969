"""When alerts arrive: a background reader that stamps every alert with its arrival time.

Recovery after a fault is "how long until alerts flow again", in two figures: the first
alert of an event stamped after the fault, counted from the fault, and the longest any such
event waited for its alert. They differ when the fault stops only part of the query: with
one executor of two killed, the other's partitions alert at once (first: ~0 s) while the
lost one's events wait for the restart (worst: the recovery as its events see it). The
collector answers "was anything lost"; this answers "when did it come back", without
slowing the collector's hot loop.
"""

from __future__ import annotations

import json
import threading
import time

from loadgen.collector import end_offsets
from loadgen.kafka_config import consumer_config


class ArrivalClock:
    """Reads ``topic`` from its current end in a thread; ``first_after`` and
    ``worst_after`` answer from it."""

    def __init__(self, bootstrap: str, topic: str):
        from confluent_kafka import Consumer

        self.arrivals: list[tuple[float, float]] = []  # (arrival epoch s, event ts epoch ms)
        self._stop = threading.Event()
        self._consumer = Consumer(consumer_config(bootstrap))
        try:
            self._consumer.assign(end_offsets(self._consumer, [topic], bootstrap))
        except Exception:
            self._consumer.close()
            raise
        self._thread = threading.Thread(target=self._run, name="arrival-clock", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            message = self._consumer.poll(0.2)
            if message is None or message.error() is not None:
                continue
            arrived = time.time()
            try:
                ts = float(json.loads(message.value() or b"")["ts"])
            except (ValueError, KeyError, TypeError):
                continue
            self.arrivals.append((arrived, ts))

    def _after(self, epoch_s: float) -> list[tuple[float, float]]:
        """(arrival epoch s, event stamp epoch s) of the alerts of events stamped after
        ``epoch_s``, arrived so far."""
        return [(arrived, ts / 1000.0) for arrived, ts in list(self.arrivals)
                if ts / 1000.0 > epoch_s]

    def first_after(self, epoch_s: float) -> float | None:
        """Seconds from ``epoch_s`` to the first arrival of an alert whose event was
        stamped after it; None if none arrived (yet)."""
        later = self._after(epoch_s)
        return min(arrived for arrived, _ in later) - epoch_s if later else None

    def worst_after(self, epoch_s: float) -> float | None:
        """The longest, in seconds, an event stamped after ``epoch_s`` waited for its alert
        (arrival minus stamp) among the alerts arrived so far; None if none arrived."""
        later = self._after(epoch_s)
        return max(arrived - stamped for arrived, stamped in later) if later else None

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self._consumer.close()

    def __enter__(self) -> ArrivalClock:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
