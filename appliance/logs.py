"""Structured JSON logging shared by every appliance process.

Event names are stable identifiers (``broker.ready``, ``query.started``...) that operators
grep and alert on; human wording goes into fields, never into the event name.
"""

from __future__ import annotations

import logging
import re
import sys
from dataclasses import dataclass

import structlog

_configured = False


# Third-party loggers that chatter at INFO (connection set-up, py4j callbacks): operators
# only need their warnings.
QUIET_LIBRARIES = ("kafka", "py4j")


@dataclass(frozen=True)
class ForeignEvent:
    """A library's log line that gets an event name of its own (see FOREIGN_EVENTS)."""
    logger: str           # the library's logger, or a parent of it
    pattern: re.Pattern   # searched in the line's text; named groups become float fields
    event: str
    why: str


# A library's line (stdlib logging) has text that changes with every call (object
# addresses, durations), so it cannot be its event name: it becomes ``library.log`` with
# the text in ``message``, or a named event for the lines operators meet in practice.
FOREIGN_EVENTS = (
    ForeignEvent("kafka.net.selector",
                 re.compile(r"ran for (?P<seconds>\d+(?:\.\d+)?)s \(>(?P<threshold_s>[\d.]+)s"),
                 "kafka.io_step_slow",
                 "kafka-python's I/O thread took longer than its threshold (0.1 s) for one "
                 "step. The library blames a tight loop; here it is a CPU-starved process "
                 "(saturated cores, a steal-heavy VM), and the client's fetches wait meanwhile"),
)
FOREIGN_DEFAULT_EVENT = "library.log"


def foreign_event(logger_name: str, text: str) -> tuple[str, dict[str, float]]:
    """The stable event name of a library's line and the fields taken from its text."""
    for rule in FOREIGN_EVENTS:
        if logger_name == rule.logger or logger_name.startswith(rule.logger + "."):
            match = rule.pattern.search(text)
            if match:
                return rule.event, {k: float(v) for k, v in match.groupdict().items()}
    return FOREIGN_DEFAULT_EVENT, {}


def _stdlib_component(logger, method_name, event_dict):
    """Name a foreign (stdlib logging) line's source the way our own lines do, and give it
    a stable event name (FOREIGN_EVENTS), its text in ``message``."""
    record = event_dict.get("_record")
    if record is not None:
        event_dict.setdefault("component", record.name)
        text = str(event_dict.get("event", ""))
        event, fields = foreign_event(record.name, text)
        event_dict["event"] = event
        event_dict["message"] = text
        for key, value in fields.items():
            event_dict.setdefault(key, value)
    return event_dict


def configure(level: str = "INFO") -> None:
    """Send structlog JSON lines to stderr, stdlib logging included. Safe to call twice."""
    global _configured
    if _configured:
        return
    shared = [
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[*shared, _stdlib_component],
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            structlog.processors.JSONRenderer(),
        ],
    ))
    root = logging.getLogger()
    root.handlers = [handler]
    root.setLevel(level)
    for name in QUIET_LIBRARIES:
        logging.getLogger(name).setLevel(logging.WARNING)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            *shared,
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level)),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
    _configured = True


def get_logger(name: str) -> structlog.typing.FilteringBoundLogger:
    """A lazy logger whose every line carries ``component=<name>``.

    Lazy (nothing is bound until the first log call) so module-level loggers created
    before :func:`configure` still emit JSON. The key is ``component`` because
    ``logger`` is a reserved argument name of ``structlog.get_logger``.
    """
    return structlog.get_logger(component=name)
