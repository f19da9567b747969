"""``appliance dashboards publish|render``: a plugin subcommand of the ``appliance`` CLI.

Named by the ``appliance.commands`` entry point (pyproject.toml), so the appliance
package never imports this one. Light on purpose: ``appliance --help`` lists it and
``appliance dashboards render --help`` shows it without importing grafana-client or
matplotlib (the ``dashboards`` extra), which the commands import when they run.
Exit codes as everywhere: 0 ok, 2 bad arguments or environment, or the extra missing
(one line), 1 Grafana/Prometheus refused or unreachable.

``appliance watch`` (dashboards.watch: Prometheus and Alertmanager with the scrape config
and rules kept here) is declared here too, for the same reason.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

from appliance.command_tree import EXIT_FAILURE, EXIT_USAGE, Command, count_arg
from appliance.durations import duration_arg, format_ms, format_seconds
from dashboards.watch_components import APPLIANCE, COMPONENTS, Component

DEFAULT_RANGE_S = 15 * 60.0
DEFAULT_STEP_S = 5.0


def _fail(code: int, command: str, message: str) -> int:
    print(f"appliance dashboards {command}: {message}", file=sys.stderr)
    return code


def _cmd_publish(args: argparse.Namespace) -> int:
    from dashboards.publish import PublishError, UsageError, publish, target_from

    try:
        target = target_from(args.url, dict(os.environ))
    except UsageError as exc:
        return _fail(EXIT_USAGE, "publish", str(exc))
    try:
        outcome = publish(target, args.prometheus_url)
    except PublishError as exc:
        return _fail(EXIT_FAILURE, "publish", str(exc))
    # The last line, read by the deploy's `changed_when`: ": unchanged" or the changes.
    print(f"published {outcome.dashboards} dashboards to {target.url}: {outcome.summary()}")
    return 0


def _cmd_render(args: argparse.Namespace) -> int:
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        return _fail(EXIT_USAGE, "render", f"--out {out}: exists and is not a directory")
    if not re.match(r"^https?://", args.prometheus):
        return _fail(EXIT_USAGE, "render", f"--prometheus: want http(s)://host:port, got "
                                           f"{args.prometheus!r}")
    from dashboards.render import RenderError, render_all

    try:
        paths = render_all(args.prometheus, out, args.range, args.step)
    except RenderError as exc:
        return _fail(EXIT_FAILURE, "render", str(exc))
    except OSError as exc:
        return _fail(EXIT_FAILURE, "render", f"--out {out}: {exc}")
    print(f"rendered {len(paths)} dashboards into {out}")
    return 0


def build(parser: argparse.ArgumentParser) -> None:
    """``dashboards`` with ``publish`` and ``render``."""
    parser.description = ("The Grafana dashboards (dashboards/): upload them to a Grafana, "
                          "or draw their panels as PNGs from a Prometheus.")
    parser.epilog = ("examples:\n"
                     "  appliance dashboards render --prometheus http://127.0.0.1:9090 "
                     "--out reports/dashboards\n"
                     "  GRAFANA_TOKEN=... appliance dashboards publish --url "
                     "https://grafana.example.org")
    sub = parser.add_subparsers(dest="dashboards_command", required=True, metavar="COMMAND")

    pub = sub.add_parser(
        "publish", help="upload folder, datasource and dashboards to Grafana",
        description="Upload the folder, the Prometheus datasource and the dashboards to a "
                    "Grafana. Credentials from the environment only: GRAFANA_TOKEN, or "
                    "GRAFANA_USER and GRAFANA_PASSWORD. Exit 0 published (the last line "
                    "says what changed), 1 Grafana refused or unreachable, 2 bad usage.",
        epilog="examples:\n  GRAFANA_URL=http://127.0.0.1:3000 GRAFANA_TOKEN=... appliance "
               "dashboards publish\n  appliance dashboards publish --url "
               "https://grafana.example.org --prometheus-url http://prometheus:9090")
    pub.add_argument("--url", default=None, help="Grafana base URL (default: $GRAFANA_URL)")
    pub.add_argument("--prometheus-url", default=None,
                     help="the Prometheus the datasource points at: created or updated to "
                          "it (default: create with the provisioning file's URL, leave an "
                          "existing datasource as is)")
    pub.set_defaults(func=_cmd_publish)

    ren = sub.add_parser(
        "render", help="each dashboard's panels as a PNG from Prometheus",
        description="Draw every panel of every dashboard from a Prometheus's data, one "
                    "PNG per dashboard (<dashboard-uid>.png). Exit 0 drawn, 1 Prometheus "
                    "refused or unreachable, 2 bad usage.",
        epilog="examples:\n  appliance watch &   # Prometheus on 127.0.0.1:9090\n"
               "  appliance dashboards render --prometheus http://127.0.0.1:9090 --out "
               "reports/dashboards --range 5m")
    ren.add_argument("--prometheus", required=True, help="Prometheus base URL")
    ren.add_argument("--out", required=True, help="directory for <dashboard-uid>.png")
    ren.add_argument("--range", type=duration_arg(allow_zero=False), default=DEFAULT_RANGE_S,
                     metavar="DURATION", help=f"time window ending now (default "
                                              f"{format_seconds(DEFAULT_RANGE_S)})")
    ren.add_argument("--step", type=duration_arg(allow_zero=False), default=DEFAULT_STEP_S,
                     metavar="DURATION", help=f"query_range step (default "
                                              f"{format_seconds(DEFAULT_STEP_S)})")
    ren.set_defaults(func=_cmd_render)


COMMAND = Command("dashboards", "Grafana dashboards: publish to Grafana, render as PNGs",
                  build, extra="dashboards")


# --- watch ------------------------------------------------------------------------------

def _target(text: str) -> str:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) <= 65535:
        raise argparse.ArgumentTypeError(f"want HOST:PORT, got {text!r}")
    return text


def _dest(component: Component) -> str:
    return component.name.replace("-", "_")


def _cmd_watch(args: argparse.Namespace) -> int:
    from dashboards.watch import WatchSettings, run_watch

    asked = {c.name: getattr(args, _dest(c)) for c in COMPONENTS
             if getattr(args, _dest(c)) is not None}
    look_for = {} if not args.discover else {c.name: c.default for c in COMPONENTS
                                             if c.name not in asked}
    return run_watch(WatchSettings(
        data_dir=Path(args.data_dir), prometheus_port=args.prometheus_port,
        alertmanager_port=args.alertmanager_port, targets=asked,
        scrape_interval_s=args.scrape_interval, retention=format_ms(args.retention * 1000),
        look_for=look_for))


def build_watch(watch: argparse.ArgumentParser) -> None:
    watch.description = (
        "Start the installed Prometheus and Alertmanager (Debian packages prometheus, "
        "prometheus-alertmanager) on 127.0.0.1 with the project's scrape config and "
        "recording and alert rules (dashboards/prometheus/), scraping the running "
        "appliance, and the broker, load generator and Spark when a flag names them or "
        "once they answer at their default ports (nothing else: a job with nothing "
        "running raises no alert); data, configs and logs in --data-dir. "
        "Prints their URLs; Ctrl-C stops both (exit 0). Exit 1 if one does not come up "
        "or dies, 2 if it cannot start (not installed, a port taken).")
    watch.epilog = ("examples:\n"
                    "  appliance watch\n"
                    "  appliance watch --appliance 127.0.0.1:9464 --scrape-interval 1s\n"
                    "  appliance dashboards render --prometheus http://127.0.0.1:9090 "
                    "--out reports/dashboards")
    watch.add_argument("--prometheus-port", type=count_arg(1), default=9090,
                       help="Prometheus listens on 127.0.0.1:PORT")
    watch.add_argument("--alertmanager-port", type=count_arg(1), default=9093,
                       help="Alertmanager listens on 127.0.0.1:PORT")
    watch.add_argument(APPLIANCE.flag, dest=_dest(APPLIANCE), type=_target,
                       default=APPLIANCE.default, metavar="HOST:PORT",
                       help=f"the appliance's metrics ({APPLIANCE.runs_as})")
    for component in COMPONENTS:
        if component is not APPLIANCE:
            watch.add_argument(
                component.flag, dest=_dest(component), type=_target, default=None,
                metavar="HOST:PORT",
                help=f"scrape {component.name} there ({component.runs_as}; default: "
                     f"scraped once it answers at {component.default})")
    watch.add_argument("--discover", action=argparse.BooleanOptionalAction, default=True,
                       help="look for the components no flag names at their default "
                            "ports, every 5 s, and scrape each once found (default); "
                            "--no-discover: only the appliance and what the flags name")
    watch.add_argument("--scrape-interval", type=duration_arg(minimum_s=1.0), default=5.0,
                       metavar="DURATION",
                       help="scrape and rule evaluation interval (default 5s; the deploy's "
                            "Prometheus: 15s)")
    watch.add_argument("--retention", type=duration_arg(minimum_s=60.0, allow_zero=False),
                       default=86_400.0,
                       metavar="DURATION",
                       help="how long Prometheus keeps data (default 1d; checked here, "
                            "given to Prometheus in its own spelling)")
    watch.add_argument("--data-dir", default="var/watch",
                       help="configs, logs and data of both servers")
    watch.set_defaults(func=_cmd_watch)


WATCH = Command("watch", "local Prometheus and Alertmanager with the project's rules, "
                         "against the running appliance", build_watch)
