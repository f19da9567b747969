"""Rules change without a restart: check the new file, swap the query at a committed boundary.

SIGHUP and ``appliance rules reload`` ask for it. The new file is checked with the same
analysis as ``appliance rules check`` inside the running driver, its query built while the
old query still runs; then the old query is brought to a committed epoch or batch and
stopped, and the new one starts from the same checkpoint in the same session. Every event
after the old query's last commit is evaluated by the new rules (some by both: duplicates
are allowed, ``alert_id`` is the dedup key), so none is evaluated by neither. A file that
fails validation changes nothing.

The runner owns the query (planning, starting, stopping it); this module owns the order of a
swap and its record: what the runner must offer is ``QueryHost``.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Protocol

from appliance import logs
from appliance.config import Config
from appliance.connector import driver_jvm
from appliance.process.query_probes import READY_TIMEOUT_S, QueryProbes
from appliance.process.reload_status import ReloadLog, ReloadOutcome, ReloadResult
from appliance.query.rules import RulesError, RuleSet, analyze_rules, load_rule_set
from appliance.trigger import BoundaryStop

if TYPE_CHECKING:  # prometheus_client and pyspark load with the parts that use them
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import DataStreamWriter

    from appliance.observability.rules_metrics import RulesCollector

# After the old query's stop, how long a swap waits for its tasks to give back their slots.
SLOTS_FREED_WAIT_S = 10.0

log = logs.get_logger("appliance")


@dataclass(frozen=True)
class SwapPhases:
    """Where a rules swap's time went (seconds), logged with ``rules.reloaded``."""

    plan_s: float           # building the new query, while the old one runs
    boundary_s: float       # waiting for the old query's committed epoch or batch
    stop_s: float           # its stop, until its tasks gave back their slots
    start_s: float          # planning and starting the new query
    first_commit_s: float   # until the new query processes (TriggerMode.ready)
    query_new_classes: int  # classes the new query generated after all

    @property
    def gap_s(self) -> float:
        """The time alerting waited: the old query stopped to the new one processing."""
        return self.stop_s + self.start_s + self.first_commit_s

    def as_log(self) -> dict[str, float | int]:
        return {k: round(v, 3) if isinstance(v, float) else v for k, v in asdict(self).items()}


@dataclass(frozen=True)
class PlannedQuery:
    """A query built for its rules and ready to ``start()`` (``QueryHost.plan_query``)."""

    rule_set: RuleSet
    writer: DataStreamWriter  # configured


class QueryHost(Protocol):
    """What a swap asks of the runner (``appliance.process.runner.Appliance``)."""

    probes: QueryProbes
    rule_set: RuleSet | None  # the rules the query runs, once loaded
    rules_metrics: RulesCollector | None  # once serving

    def running_rules(self) -> RuleSet: ...

    def session(self) -> SparkSession: ...

    def plan_query(self, rule_set: RuleSet) -> PlannedQuery: ...

    def start_query(self, planned: RuleSet | PlannedQuery | None = None) -> None: ...

    def generated_classes(self) -> int: ...


class RulesSwap:
    """Reload requests and their outcomes, and the swap each applied one does."""

    def __init__(self, host: QueryHost, config: Config):
        self.host = host
        self.config = config
        self.mode = config.query.mode
        self.reloads = ReloadLog()
        self._requested = threading.Event()

    def request(self) -> None:
        """Ask the runner's serve loop to reload the rules file (safe from a signal handler)."""
        self._requested.set()

    def take_request(self) -> bool:
        """True (once) if a reload was asked for since the last call."""
        if not self._requested.is_set():
            return False
        self._requested.clear()
        return True

    def status(self) -> dict[str, object]:
        """The ``/-/rules`` page: this process, the running rules, the last reload."""
        seq, last = self.reloads.snapshot()
        rule_set = self.host.rule_set
        return {
            "pid": os.getpid(),
            "path": str(self.config.rules.path),
            "version": rule_set.version if rule_set is not None else None,
            "rules": len(rule_set) if rule_set is not None else 0,
            "reloads": seq,
            "last_reload": last.as_dict() if last is not None else None,
        }

    def reload(self) -> ReloadOutcome:
        """Re-read ``[rules] path``; swap the query onto the new rules if they pass the same
        analysis as ``appliance rules check``. Never raises: the outcome says what happened
        (and is logged, counted and kept for ``appliance rules reload``)."""
        host = self.host
        started, started_at = time.monotonic(), time.time()
        seq, source = self.reloads.next_seq(), str(self.config.rules.path)
        previous = host.running_rules()

        def outcome(result: ReloadResult, **fields) -> ReloadOutcome:
            running = host.running_rules()
            done = ReloadOutcome(seq=seq, result=result, source=source,
                                 version=running.version,
                                 previous_version=previous.version, started_at=started_at,
                                 seconds=round(time.monotonic() - started, 3), **fields)
            self.reloads.record(done)
            if host.rules_metrics is not None:
                host.rules_metrics.reloaded(result.value)
                host.rules_metrics.running(running.version, len(running))
            return done

        try:
            candidate = load_rule_set(source)
            analyze_rules(host.session(), candidate.rules, source)
            analysed_s = time.monotonic() - started
        except RulesError as exc:
            log.warning("rules.rejected", path=source, problems=exc.problems,
                        version=previous.version)
            return outcome(ReloadResult.REJECTED, error=exc.problems[0],
                           problems=tuple(exc.problems))
        if candidate.version == previous.version:
            log.info("rules.unchanged", path=source, version=previous.version)
            return outcome(ReloadResult.UNCHANGED)
        try:
            phases = self._swap(candidate, previous)
        except Exception as exc:  # noqa: BLE001 - reported; the old rules run if they can
            error = " ".join(str(exc).split())[:2000]
            log.error("rules.swap_failed", path=source, version=candidate.version,
                      running_version=host.running_rules().version, error=error,
                      kind=type(exc).__name__)
            return outcome(ReloadResult.FAILED, error=error)
        if host.rules_metrics is not None:
            host.rules_metrics.swapped(phases.gap_s)
        done = outcome(ReloadResult.APPLIED, swap_s=round(phases.gap_s, 3))
        log.info("rules.reloaded", path=source, version=candidate.version,
                 previous_version=previous.version, rules=len(candidate),
                 gap_s=round(phases.gap_s, 3), seconds=done.seconds,
                 analyse_s=round(analysed_s, 3), **phases.as_log())
        return done

    def _swap(self, new: RuleSet, old: RuleSet) -> SwapPhases:
        """Stop the running query at a committed boundary and start it on ``new``; returns
        where the time went. If the new query cannot start, the old rules are started
        again and the error raised."""
        host, probes = self.host, self.host.probes
        mark = time.monotonic()
        planned = host.plan_query(new)
        classes_before = host.generated_classes()
        built = time.monotonic()
        self._to_boundary()
        stopping = time.monotonic()
        self._stop_query()
        self._wait_slots_freed()
        stopped = time.monotonic()
        try:
            host.start_query(planned)
            started = time.monotonic()
            if not probes.wait_until_processing(READY_TIMEOUT_S):
                raise RuntimeError(f"the new query did not start processing: "
                                   f"{probes.failure() or 'timeout'}")
        except Exception:
            if probes.active():
                self._stop_query()
                self._wait_slots_freed()
            host.start_query(old)
            raise
        processing = time.monotonic()
        return SwapPhases(plan_s=built - mark, boundary_s=stopping - built,
                          stop_s=stopped - stopping, start_s=started - stopped,
                          first_commit_s=processing - started,
                          query_new_classes=host.generated_classes() - classes_before)

    def _stop_query(self) -> None:
        query = self.host.probes.query
        if query is None:
            raise RuntimeError("no query started: start_query() comes first")
        query.stop()

    def _to_boundary(self) -> None:
        """Let the running query reach a committed epoch or batch (``TriggerMode.boundary``):
        stopped there, its successor replays nothing it has committed. Bounded: past
        ``boundary_wait_s`` the query is stopped anyway (its successor replays more)."""
        cfg, probes = self.config.query, self.host.probes
        before = max(probes.commits(), default=-1)
        if self.mode.boundary is BoundaryStop.END_BATCH:
            asked = driver_jvm(self.host.session()).io.appliance.kafka.BatchEnd.request(
                os.path.abspath(cfg.checkpoint_dir))
            if not asked:
                log.warning("rules.boundary_unavailable", trigger=self.mode.name,
                            reason="the source runs no batch it could end early: the new "
                                   "query replays the running batch")
                return
        waited = time.monotonic()
        deadline = waited + self.mode.boundary_wait_s(cfg.trigger_interval)
        while time.monotonic() < deadline:
            if max(probes.commits(), default=-1) > before:
                log.info("rules.boundary", trigger=self.mode.name, batch=before + 1,
                         waited_s=round(time.monotonic() - waited, 3))
                return
            if probes.terminated(0.01):
                return
        log.warning("rules.boundary_timeout", trigger=self.mode.name,
                    waited_s=round(time.monotonic() - waited, 1),
                    reason="no commit in time: stopping anyway, the new query replays more")

    def _wait_slots_freed(self) -> None:
        """After a stop, until the old query's long-running tasks have given back the task
        slots its successor needs (bounded; its successor then waits in the scheduler)."""
        if not self.mode.slot_per_partition:
            return
        deadline = time.monotonic() + SLOTS_FREED_WAIT_S
        while self.host.probes.tasks_launched() > 0 and time.monotonic() < deadline:
            time.sleep(0.005)
