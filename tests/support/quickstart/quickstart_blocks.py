"""The README's quick start as the tests run it: its marked shell blocks, as written.

A block is run when an HTML comment ``<!-- quickstart: NAME -->`` stands right before it.
A test may shorten a block's durations, and only by naming the exact text it replaces
(``shortened``): a README edit that changes that text fails the test instead of silently
running something else.
"""

from __future__ import annotations

import os
import re
import socket
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
README = ROOT / "README.md"
MARKED = re.compile(r"<!-- quickstart: ([a-z0-9-]+) -->\n```sh\n(.*?)```", re.S)
# A warning line as Spark's log4j layout prints it (kept in the log file).
SPARK_WARNING = re.compile(r"^\d\d/\d\d/\d\d \d\d:\d\d:\d\d WARN ", re.M)
# On a person's terminal: nothing that reads like trouble during a clean run and stop:
# no line of Spark's log4j (its layout, or the terminal's one-line "spark LEVEL"), no JVM
# notice ("WARNING: ..."), no error event, no traceback...
ALARMING = re.compile(r"^\d\d/\d\d/\d\d \d\d:\d\d:\d\d [A-Z]+ |^spark [A-Z]+ |^WARNING: "
                      r"|\[error|Traceback|Exception", re.M)
# ...and of the appliance's own warning events only those that report the machine, not
# the run: kafka-python's I/O step held up on a CPU-starved machine (appliance.logs).
# (Likewise loadgen's own "generator fell behind its schedule" line: not matched above.)
WARNING_EVENT = re.compile(r"\[warning\s*\] (\S+)")
MACHINE_WARNINGS = {"kafka.io_step_slow"}


def alarming(shown: str) -> list[str]:
    """What a person would read as trouble on the terminal (empty: nothing)."""
    found = [m.group(0) for m in ALARMING.finditer(shown)]
    return found + [event for event in WARNING_EVENT.findall(shown)
                    if event not in MACHINE_WARNINGS]


def blocks() -> dict[str, str]:
    """Every marked block of the README by name (names are unique)."""
    found: dict[str, str] = {}
    for name, text in MARKED.findall(README.read_text(encoding="utf-8")):
        assert name not in found, f"README.md: two blocks marked quickstart: {name}"
        found[name] = text
    return found


def block(name: str) -> str:
    text = blocks().get(name)
    assert text is not None, f"README.md: no ```sh block marked <!-- quickstart: {name} -->"
    return text


def shortened(text: str, replacements: dict[str, str]) -> str:
    """``text`` with each key replaced by its value; every key must occur exactly once."""
    for old, new in replacements.items():
        assert text.count(old) == 1, f"README block no longer has {old!r} once:\n{text}"
        text = text.replace(old, new)
    return text


# What the test run's own environment has and a user's shell does not: `make test`'s
# settings for sub-makes (its jobserver's descriptors are not passed on), pytest's.
_NOT_A_USERS = ("APPLIANCE_", "LOCUST_", "LOADGEN_", "PYTEST_", "MAKEFLAGS", "MFLAGS",
                "MAKELEVEL", "MAKE_TERM")


def user_env(**extra: str) -> dict[str, str]:
    """A user's environment: none of the test run's APPLIANCE_*/LOCUST_*/make settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_NOT_A_USERS)}
    env.update(extra)
    return env


def wait_until_free(ports: list[int], timeout: float) -> None:
    """Wait (bounded) until nothing listens on these 127.0.0.1 ports: the README's fixed
    ports are shared by every checkout on this machine, and another checkout's run of
    this same test may hold them for a few minutes."""
    deadline = time.monotonic() + timeout
    while True:
        taken = [p for p in ports if _taken(p)]
        if not taken:
            return
        assert time.monotonic() < deadline, (
            f"127.0.0.1:{taken} still in use after {timeout:.0f} s: the README's commands "
            f"need them (stop what listens there)")
        time.sleep(2.0)


def _taken(port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False
