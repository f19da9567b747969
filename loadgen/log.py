"""Loggers for loadgen modules: ``appliance.logs.get_logger``, one naming scheme."""

from __future__ import annotations

from appliance.logs import get_logger


def logger(name: str):
    """``appliance.logs.get_logger(name)``; its equivalent while that raises TypeError.

    The fallback covers a known bug in ``get_logger`` (reported in shared notes) and goes
    away once it is fixed.
    """
    try:
        return get_logger(name)
    except TypeError:
        import structlog

        return structlog.get_logger().bind(logger=name)
