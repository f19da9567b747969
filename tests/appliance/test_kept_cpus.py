"""``[cpus] after_ready`` in the lifecycle: the check before anything starts (exit 2's
message) and a stop that releases nothing when nothing was kept (no JVM; the pinning
itself is tests/appliance/test_cpus_after_ready.py)."""

from __future__ import annotations

import pytest

from appliance.config import CpusConfig
from appliance.process.kept_cpus import KeptCpus
from appliance.process.preflight import PreflightError


def test_off_checks_nothing_and_keeps_nothing():
    cpus = KeptCpus(CpusConfig())
    cpus.check(allowed={0})
    cpus.keep(excluded=lambda: [])
    cpus.release()  # nothing kept: nothing to give back


def test_keeping_every_cpu_the_process_may_use_is_refused_before_the_start():
    cpus = KeptCpus(CpusConfig.model_validate({"after_ready": "0-1"}))
    with pytest.raises(PreflightError, match=r"^cpus\.after_ready: "):
        cpus.check(allowed={0, 1})
    cpus.check(allowed={0, 1, 2})
