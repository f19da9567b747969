"""Rules change without a restart: check the new file, publish it into the running query.

SIGHUP and ``appliance rules reload`` ask for it. The new file gets the same checks as at
start-up (``appliance rules check``'s, then Spark's analysis in the running driver) while
the old rules keep running; then it is published into the query's rule book
(``appliance.rules.rule_book``), where it takes effect from the next epoch or micro-batch no
task has entered, or at each task's next record in a real-time batch
(``TriggerMode.rules_switch``): no task stops, so alerting does not wait. Every event is
evaluated by exactly one version, and each alert names it (``rules_version``). A file that
fails validation changes nothing.

Which rules run, and their book, is ``appliance.process.running_rules``; this module owns
the order of a reload and its record.
"""

from __future__ import annotations

import os
import threading
import time
from typing import TYPE_CHECKING

from appliance import logs
from appliance.config import Config
from appliance.process.reload_status import ReloadLog, ReloadOutcome, ReloadResult
from appliance.process.running_rules import RunningRules
from appliance.rules.rules_file import RulesError, load_rule_set

if TYPE_CHECKING:  # pyspark loads with the parts that use it
    from appliance.rules.rule_book import RuleBook

log = logs.get_logger("appliance")


class RulesSwap:
    """Reload requests and their outcomes, and the publication each applied one does."""

    def __init__(self, rules: RunningRules, config: Config):
        self.rules = rules
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
        rule_set = self.rules.rule_set
        return {
            "pid": os.getpid(),
            "path": str(self.config.rules.path),
            "version": rule_set.version if rule_set is not None else None,
            "rules": len(rule_set) if rule_set is not None else 0,
            "reloads": seq,
            "last_reload": last.as_dict() if last is not None else None,
        }

    def reload(self) -> ReloadOutcome:
        """Re-read ``[rules] path``; publish it into the running query if it passes the
        same checks as at start-up. Never raises: the outcome says what happened (and is
        logged, counted and kept for ``appliance rules reload``)."""
        host = self.rules
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

        book = host.rule_book()
        try:
            candidate = load_rule_set(source)
            if candidate.version == previous.version:
                log.info("rules.unchanged", path=source, version=previous.version)
                return outcome(ReloadResult.UNCHANGED)
            checked_s = time.monotonic() - started
            compiled = book.compile(candidate)
        except RulesError as exc:
            log.warning("rules.rejected", path=source, problems=exc.problems,
                        version=previous.version)
            return outcome(ReloadResult.REJECTED, error=exc.problems[0],
                           problems=tuple(exc.problems))
        except Exception as exc:  # noqa: BLE001 - reported; the old rules keep running
            error = " ".join(str(exc).split())[:2000]
            log.error("rules.swap_failed", path=source, version=candidate.version,
                      running_version=previous.version, error=error, kind=type(exc).__name__)
            return outcome(ReloadResult.FAILED, error=error)
        compiled_s = time.monotonic() - started
        publication = book.publish(compiled)
        host.rule_set = candidate
        switched = time.monotonic()
        in_effect = self._wait_in_effect(book, publication.seq)
        waited_s = time.monotonic() - switched
        # The time alerting waited: none, tasks switch between epochs, batches or records
        # (kept as a metric: a swap that ever made alerting wait would show here).
        swap_s = 0.0
        if host.rules_metrics is not None:
            host.rules_metrics.swapped(swap_s)
        done = outcome(ReloadResult.APPLIED, swap_s=round(swap_s, 3),
                       effective_from=publication.effective_from, in_effect=in_effect)
        timings = compiled.timings
        log.info("rules.reloaded", path=source, version=candidate.version,
                 previous_version=previous.version, rules=len(candidate),
                 effective_from=publication.effective_from, in_effect=in_effect,
                 in_effect_s=round(waited_s, 3), gap_s=round(swap_s, 3),
                 seconds=done.seconds, check_s=round(checked_s, 3),
                 compile_s=round(compiled_s - checked_s, 3), parse_ms=timings.parse_ms,
                 analyze_ms=timings.analyze_ms, optimize_ms=timings.optimize_ms,
                 index=compiled.index)
        return done

    def _wait_in_effect(self, book: RuleBook, seq: int) -> bool:
        """Until a task runs version ``seq`` (bounded by ``TriggerMode.switch_wait_s``: an
        idle query runs nothing, and the new rules then take effect with its first
        record)."""
        deadline = time.monotonic() + self.mode.switch_wait_s(self.config.query.trigger_interval)
        while time.monotonic() < deadline:
            if book.reached(seq):
                return True
            time.sleep(0.01)
        return book.reached(seq)
