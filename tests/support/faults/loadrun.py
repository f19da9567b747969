"""The load generator's Python API run in a background thread, so a test can inject
faults while a steady open-loop load runs."""

from __future__ import annotations

import threading

from loadgen.config import LoadConfig
from loadgen.events import EventFactory, rules_yaml
from loadgen.report import Report
from loadgen.run import run_load

__all__ = ["LoadThread", "rules_yaml"]


class LoadThread:
    def __init__(self, bootstrap: str, topics: dict[str, str], rate: float, duration: float,
                 grace: float = 600.0, alert_ratio: float = 0.2, bad_ratio: float = 0.0):
        self.config = LoadConfig(
            bootstrap=bootstrap, rate=rate, duration=duration, grace=grace,
            alert_ratio=alert_ratio, bad_ratio=bad_ratio, events_topic=topics["events"],
            alerts_topic=topics["alerts"], dlq_topic=topics["dead_letters"], workers=1,
            progress=False, floor_seconds=0.0, drain_s=5.0)
        self.factory = EventFactory(self.config.run_id, alert_ratio, bad_ratio)
        self.report: Report | None = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="fault-load", daemon=True)

    def _run(self) -> None:
        try:
            self.report = run_load(self.config)
        except BaseException as exc:  # handed to the test by join()
            self.error = exc

    def start(self) -> LoadThread:
        self._thread.start()
        return self

    def running(self) -> bool:
        return self._thread.is_alive()

    def join(self, timeout: float) -> Report:
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "load run did not finish in time"
        if self.error is not None:
            raise self.error
        assert self.report is not None
        return self.report
