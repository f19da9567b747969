"""``appliance demo``'s flags: the ``Command`` the ``appliance.commands`` entry point names.

Light on purpose (argparse and the appliance's leaf modules): ``appliance --help`` lists
it, and ``appliance demo --help`` shows it, without importing Spark's runner or the load
generator; ``loadgen.demo`` is imported when the demo runs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from appliance.command_tree import (
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    Command,
    hidden_alias,
    number_arg,
)
from appliance.durations import duration_arg
from appliance.log_options import add_log_options
from appliance.trigger import DEFAULT as DEFAULT_TRIGGER
from appliance.trigger import TRIGGERS

DEFAULT_REPORT = "reports/demo.json"


def log_file(report: str | None) -> str:
    """The demo's full log on a terminal: next to its report."""
    return str(Path(report).with_suffix(".log")) if report else "reports/demo.log"


def _command(args: argparse.Namespace) -> int:
    # Imported here, when the demo runs: they start Spark and bring the load generator.
    from appliance import logs
    from appliance.config import ConfigError
    from loadgen.demo import run_demo

    try:
        output = logs.configure_from_args(args, log_file(args.report))
    except logs.LogFileError as exc:
        print(f"appliance demo: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if output.file is not None:
        print(f"appliance demo: starting (about a minute); full log: {output.file}",
              file=sys.stderr, flush=True)
    try:
        return run_demo(seconds=args.duration, rate=args.rate, trigger=args.trigger,
                        report=args.report)
    except ConfigError as exc:
        for line in str(exc).splitlines():
            print(line, file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:  # Ctrl-C: run_demo has stopped the appliance on its way out
        print("appliance demo: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def build(demo: argparse.ArgumentParser) -> None:
    demo.description = (
        "Embedded broker, appliance and load generator in one process: about a minute, "
        "then the latency report (printed, and written as JSON, Markdown and PNG). Exit 0 "
        "every alert came back, 3 some were lost, 1 the appliance failed, 130 Ctrl-C.")
    demo.epilog = ("examples:\n"
                   "  appliance demo\n"
                   "  appliance demo --duration 60s --rate 2000\n"
                   "  appliance demo --trigger realtime --report reports/realtime.json")
    demo.add_argument("--duration", type=duration_arg(allow_zero=False), default=20.0,
                      metavar="DURATION", help="how long to send load: 20s, 2m... "
                                               "(default 20s)")
    hidden_alias(demo, "--seconds", dest="duration", type=duration_arg(allow_zero=False))
    demo.add_argument("--rate", type=number_arg(0, above=True), default=500.0,
                      help="events per second")
    demo.add_argument("--trigger", choices=TRIGGERS, default=DEFAULT_TRIGGER.name,
                      help="the query's trigger mode")
    demo.add_argument("--report", default=DEFAULT_REPORT,
                      help="JSON report path (the .md, .png and .log beside it)")
    add_log_options(demo, log_file(DEFAULT_REPORT))
    demo.set_defaults(func=_command)


DEMO = Command("demo", "embedded broker + appliance + load, then a latency report", build,
               extra="loadgen")
