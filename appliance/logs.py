"""Structured JSON logging shared by every appliance process.

Event names are stable identifiers (``broker.ready``, ``query.started``...) that operators
grep and alert on; human wording goes into fields, never into the event name.
"""

from __future__ import annotations

import logging
import sys

import structlog

_configured = False


# Third-party loggers that chatter at INFO (connection set-up, py4j callbacks): operators
# only need their warnings.
QUIET_LIBRARIES = ("kafka", "py4j")


def _stdlib_component(logger, method_name, event_dict):
    """Name a foreign (stdlib logging) line's source the way our own lines do."""
    record = event_dict.get("_record")
    if record is not None:
        event_dict.setdefault("component", record.name)
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
