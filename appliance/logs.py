"""Structured JSON logging shared by every appliance process.

Event names are stable identifiers (``broker.ready``, ``query.started``...) that operators
grep and alert on; human wording goes into fields, never into the event name.
"""

from __future__ import annotations

import logging
import sys

import structlog

_configured = False


def configure(level: str = "INFO") -> None:
    """Send structlog JSON lines to stderr. Safe to call more than once."""
    global _configured
    if _configured:
        return
    logging.basicConfig(format="%(message)s", stream=sys.stderr, level=level)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
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
