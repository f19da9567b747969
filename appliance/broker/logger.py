"""The broker's logger: ``appliance.logs.get_logger``, with the agreed fallback.

``appliance.logs.get_logger`` currently raises TypeError (reported to the lead in
shared notes); until fixed we bind the logger name the same way it is meant to.
"""

from __future__ import annotations

import structlog

from appliance.logs import get_logger


def broker_logger(name: str = "appliance.broker"):
    try:
        return get_logger(name)
    except TypeError:
        return structlog.get_logger().bind(logger=name)
