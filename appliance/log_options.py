"""The log-output flags (``--log-format``, ``--log-file``) and the formats they choose.

Apart from ``appliance.logs`` so that a command's flags (and ``--help``) are defined
without importing structlog; ``appliance.logs`` configures what they choose.
"""

from __future__ import annotations

import argparse
import enum


class LogFormat(enum.Enum):
    CONSOLE = "console"  # people: one readable line per event
    JSON = "json"  # machines: one JSON object per line


#: The ``--log-format`` choices; ``auto`` = console on a terminal, else JSON.
LOG_FORMAT_CHOICES = ("auto", *(f.value for f in LogFormat))


def add_log_options(parser: argparse.ArgumentParser, default_file: str | None) -> None:
    """``--log-format`` and ``--log-file`` on a command (``appliance run``, ``demo``)."""
    parser.add_argument("--log-format", choices=LOG_FORMAT_CHOICES, default="auto",
                        help="console: readable lines; json: one JSON object per line; "
                             "auto (the default): console on a terminal, else json")
    where = f" (default with console output: {default_file})" if default_file else ""
    parser.add_argument("--log-file", default=None, metavar="FILE",
                        help=f"also write every line there: ours as JSON, Spark's and "
                             f"other processes' as they print them{where}")
