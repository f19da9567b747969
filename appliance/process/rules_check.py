"""The rules file's check (no JVM) on a thread of its own, so a large file's check runs
while the broker and Spark start instead of before them.

Why: ``appliance run`` checked the rules file before anything started, so a bad rule exits
2 in about a second without a JVM. A 10,000-rule file's check takes ~2 s of Python on this
machine, all of it added to ``ready``. ``appliance run`` now starts the check here and
waits at most ``WAIT_S`` for it: every small file (milliseconds) is still checked before
anything starts, exactly as before; a check still running after that goes on beside the
start, and the start takes its rule set (or its ``RulesError``, exit 2 with the same
lines) the moment it first needs the rules: with ``[ha]``, before asking the partner;
otherwise after Spark's session opens, before Spark compiles the rules.

The check itself is ``appliance.rules.rules_file.load_rule_set``, unchanged: the same
verdicts whichever thread gives them.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from appliance.rules.rules_file import RuleSet, load_rule_set

#: How long ``appliance run`` waits for the check before starting beside it (seconds).
WAIT_S = 0.5


class RulesCheck:
    """``load_rule_set(path)`` running on a daemon thread; ``result`` waits for it."""

    def __init__(self, path: str | Path) -> None:
        self.path = path
        self.seconds: float | None = None  # the check's own time, once done
        self._started = time.monotonic()
        self._rule_set: RuleSet | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="rules-check", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._rule_set = load_rule_set(self.path)
        except BaseException as exc:  # noqa: BLE001 - handed to whoever waits (RulesError...)
            self._error = exc
        finally:
            self.seconds = round(time.monotonic() - self._started, 3)

    def done(self, timeout: float = 0.0) -> bool:
        """Whether the check has finished, waiting at most ``timeout`` seconds."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def result(self) -> RuleSet:
        """The checked rule set, once the check is done; raises what the check raised
        (``RulesError`` listing every problem)."""
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._rule_set is not None
        return self._rule_set
