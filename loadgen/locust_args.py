"""The locustfile's flags (``loadgen.locust_flags``), registered with Locust when this is
imported.

Locust prints ``--help`` before it loads a locustfile, so ``locust -f loadgen/locustfile.py
--help`` cannot show a locustfile's own flags. ``python -m loadgen.locust_cli`` imports
this module first, so the same help lists them with Locust's; the locustfile imports it
too (one module, so the flags are added once whichever way Locust was started).
"""

from __future__ import annotations

from locust import events

from loadgen.locust_flags import FLAGS


@events.init_command_line_parser.add_listener
def add_arguments(parser) -> None:
    """Custom arguments: shown and settable in the web UI's start form (Locust's own
    ``add_argument``: an argument group's would leave them out of the UI)."""
    for flag in FLAGS:
        parser.add_argument(flag.name, type=flag.kind, env_var=flag.env_var,
                            default=flag.default, help=flag.help)
    # Services bind to loopback unless told otherwise (Locust's own default is every
    # interface); --web-host or LOCUST_WEB_HOST still choose.
    parser.set_defaults(web_host="127.0.0.1")
