"""The environment of a child process a test starts (``python -m appliance ...``,
``loadgen``, Locust): this one's, minus every ``APPLIANCE_*`` and ``LOADGEN_*`` override the
developer's shell may carry (the test's own config says what it means), with the checkout
on ``PYTHONPATH``, plus what the test adds."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def child_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("APPLIANCE_", "LOADGEN_"))}
    env["PYTHONPATH"] = str(ROOT)
    env.update(extra)
    return env
