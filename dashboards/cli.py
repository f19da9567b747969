"""``appliance dashboards publish|render``: a plugin subcommand of the ``appliance`` CLI.

Registered through the ``appliance.commands`` entry point (pyproject.toml), so the
appliance package never imports this one. Exit codes as everywhere: 0 ok, 2 bad
arguments or environment (one line), 1 Grafana/Prometheus refused or unreachable.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

from dashboards.publish import PublishError, UsageError, publish, target_from
from dashboards.render import RenderError, render_all

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(s|m|h)$")


def _duration(text: str) -> float:
    match = _DURATION.match(text)
    if not match or float(match.group(1)) <= 0:
        raise argparse.ArgumentTypeError(f"want a duration like 90s, 15m or 1h, got {text!r}")
    return float(match.group(1)) * {"s": 1, "m": 60, "h": 3600}[match.group(2)]


def _fail(code: int, command: str, message: str) -> int:
    print(f"appliance dashboards {command}: {message}", file=sys.stderr)
    return code


def _cmd_publish(args: argparse.Namespace) -> int:
    try:
        target = target_from(args.url, dict(os.environ))
    except UsageError as exc:
        return _fail(2, "publish", str(exc))
    try:
        outcome = publish(target, args.prometheus_url)
    except PublishError as exc:
        return _fail(1, "publish", str(exc))
    # The last line, read by the deploy's `changed_when`: ": unchanged" or the changes.
    print(f"published {outcome.dashboards} dashboards to {target.url}: {outcome.summary()}")
    return 0


def _cmd_render(args: argparse.Namespace) -> int:
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        return _fail(2, "render", f"--out {out}: exists and is not a directory")
    if not re.match(r"^https?://", args.prometheus):
        return _fail(2, "render", f"--prometheus: want http(s)://host:port, got "
                                  f"{args.prometheus!r}")
    try:
        paths = render_all(args.prometheus, out, args.range, args.step)
    except RenderError as exc:
        return _fail(1, "render", str(exc))
    except OSError as exc:
        return _fail(1, "render", f"--out {out}: {exc}")
    print(f"rendered {len(paths)} dashboards into {out}")
    return 0


def register(subparsers) -> None:
    """Add ``dashboards`` (with ``publish`` and ``render``) to the ``appliance`` CLI."""
    parser = subparsers.add_parser("dashboards", help="Grafana dashboards: publish, render")
    sub = parser.add_subparsers(dest="dashboards_command", required=True)

    pub = sub.add_parser("publish", help="upload folder, datasource and dashboards to Grafana",
                         description="Credentials from the environment only: GRAFANA_TOKEN, "
                                     "or GRAFANA_USER and GRAFANA_PASSWORD.")
    pub.add_argument("--url", default=None, help="Grafana base URL (default: $GRAFANA_URL)")
    pub.add_argument("--prometheus-url", default=None,
                     help="the Prometheus the datasource points at: created or updated to "
                          "it (default: create with the provisioning file's URL, leave an "
                          "existing datasource as is)")
    pub.set_defaults(func=_cmd_publish)

    ren = sub.add_parser("render", help="each dashboard's panels as a PNG from Prometheus")
    ren.add_argument("--prometheus", required=True, help="Prometheus base URL")
    ren.add_argument("--out", required=True, help="directory for <dashboard-uid>.png")
    ren.add_argument("--range", type=_duration, default=_duration("15m"),
                     help="time window ending now (default 15m)")
    ren.add_argument("--step", type=_duration, default=_duration("5s"),
                     help="query_range step (default 5s)")
    ren.set_defaults(func=_cmd_render)
