"""The locustfile's own flags as one table, importable without Locust.

Locust registers a locustfile's flags through its ``init_command_line_parser`` event, and
importing Locust monkey-patches the process with gevent: a test or a docs check that only
wants the flags' names must not pay that (in a pytest worker it breaks the worker's own
sockets). So the facts live here, Locust-free, and ``loadgen.locust_args`` registers them.
"""

from __future__ import annotations

from dataclasses import dataclass

from loadgen.config import LoadConfig


@dataclass(frozen=True)
class LocustFlag:
    """One flag: its name, the environment variable Locust also reads it from, the value
    type Locust parses it as (``str`` when the locustfile parses it itself), its default
    and the help Locust's ``--help`` and web UI show."""

    name: str
    env_var: str
    kind: type
    default: object
    help: str

    @property
    def dest(self) -> str:
        """The attribute on Locust's ``parsed_options``."""
        return self.name.lstrip("-").replace("-", "_")


DEFAULT_ALERT_TIMEOUT = "10s"

FLAGS: tuple[LocustFlag, ...] = (
    LocustFlag("--bootstrap-server", "LOADGEN_BOOTSTRAP_SERVER", str, "",
               "the Kafka to load, HOST:PORT (default: Locust's --host)"),
    LocustFlag("--user-rate", "LOADGEN_USER_RATE", float, 10.0, "events per second per user"),
    LocustFlag("--alert-ratio", "LOADGEN_ALERT_RATIO", float, LoadConfig.alert_ratio,
               "share of events that match an example rule"),
    LocustFlag("--bad-ratio", "LOADGEN_BAD_RATIO", float, LoadConfig.bad_ratio,
               "share of malformed events (answered by dead letters)"),
    LocustFlag("--alert-timeout", "LOADGEN_ALERT_TIMEOUT", str, DEFAULT_ALERT_TIMEOUT,
               "an alert or dead letter not read back within this counts as a failure "
               "(20s, 1m...)"),
)
#: The flags' names, as Locust's help and web UI show them.
FLAG_NAMES = tuple(flag.name for flag in FLAGS)
