"""The locustfile's five flags (``--bootstrap-server``, ``--user-rate``, ``--alert-ratio``,
``--bad-ratio``, ``--alert-timeout``), registered with Locust when this is imported.

Locust prints ``--help`` before it loads a locustfile, so ``locust -f loadgen/locustfile.py
--help`` cannot show a locustfile's own flags. ``python -m loadgen.locust_cli`` imports
this module first, so the same help lists them with Locust's; the locustfile imports it
too (one module, so the flags are added once whichever way Locust was started).
"""

from __future__ import annotations

from locust import events

from loadgen.config import LoadConfig

DEFAULT_ALERT_TIMEOUT = "10s"
#: The project's flags, as Locust's help and web UI show them.
FLAGS = ("--bootstrap-server", "--user-rate", "--alert-ratio", "--bad-ratio", "--alert-timeout")


@events.init_command_line_parser.add_listener
def add_arguments(parser) -> None:
    """Custom arguments: shown and settable in the web UI's start form (Locust's own
    ``add_argument``: an argument group's would leave them out of the UI)."""
    parser.add_argument("--bootstrap-server", env_var="LOADGEN_BOOTSTRAP_SERVER", default="",
                        help="the Kafka to load, HOST:PORT (default: Locust's --host)")
    parser.add_argument("--user-rate", type=float, env_var="LOADGEN_USER_RATE", default=10.0,
                        help="events per second per user")
    parser.add_argument("--alert-ratio", type=float, env_var="LOADGEN_ALERT_RATIO",
                        default=LoadConfig.alert_ratio,
                        help="share of events that match an example rule")
    parser.add_argument("--bad-ratio", type=float, env_var="LOADGEN_BAD_RATIO",
                        default=LoadConfig.bad_ratio,
                        help="share of malformed events (answered by dead letters)")
    parser.add_argument("--alert-timeout", env_var="LOADGEN_ALERT_TIMEOUT",
                        default=DEFAULT_ALERT_TIMEOUT,
                        help="an alert or dead letter not read back within this counts as a "
                             "failure (20s, 1m...)")
    # Services bind to loopback unless told otherwise (Locust's own default is every
    # interface); --web-host or LOCUST_WEB_HOST still choose.
    parser.set_defaults(web_host="127.0.0.1")
