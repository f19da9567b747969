"""Every ``appliance broker`` flag docs/broker.md's tables name is one the command takes,
and every flag the command takes is documented there: docs and code do not drift."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from appliance.broker.cli import add_broker_options

DOC = Path(__file__).resolve().parents[2] / "docs" / "broker.md"
# Flags for the bench's comparison only, hidden from --help on purpose.
HIDDEN = {"--max-in-flight-requests", "--unsafe-skip-produce-crc"}


def _flags() -> set[str]:
    parser = argparse.ArgumentParser()
    add_broker_options(parser)
    return {opt for action in parser._actions for opt in action.option_strings
            if opt.startswith("--") and opt != "--help"}


def test_documented_flags_exist_and_existing_flags_are_documented():
    doc = DOC.read_text()
    tables = [line for line in doc.splitlines() if line.startswith("| `--")]
    in_tables = {flag for line in tables
                 for flag in re.findall(r"`(--[a-z][a-z0-9-]*)", line.split("|")[1])}
    flags = _flags()
    assert in_tables - flags == set(), sorted(in_tables - flags)
    undocumented = {f for f in flags - HIDDEN if f"`{f}" not in doc and f"{f} " not in doc}
    assert undocumented == set(), sorted(undocumented)
