"""The appliance's topic names unless ``[topics]`` says otherwise.

A leaf (standard library only): ``appliance.config`` takes its defaults from here, and the
load generator's command line shows them without importing the config model (pydantic),
which would cost ``loadgen --help`` a quarter of a second.
"""

from __future__ import annotations

from typing import NamedTuple


class TopicNames(NamedTuple):
    events: str = "events"
    alerts: str = "alerts"
    dead_letters: str = "events.dlq"
    # Synthetic records of the start-up warm-up (appliance.query.warmup).
    warmup: str = "appliance.warmup"


DEFAULT_TOPICS = TopicNames()
