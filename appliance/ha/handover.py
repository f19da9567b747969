"""``appliance ha handover``: ask a pair's active instance to hand over to its standby.

The request is a record on the control topic, which only the active instance reads
(``control``); it steps down (``takeover.step_down``) and waits warm as the standby,
while the standby takes over. The command waits until the new active says it serves.
Refused when the group has no standby: the active would hand over to nobody.
"""

from __future__ import annotations

import time
from typing import NamedTuple

from appliance.config import Config
from appliance.ha.control import (
    HANDOVER,
    SERVING,
    announce,
    end_offset,
    group_members,
    wait_for,
)
from appliance.ha.instance import control_topic
from appliance.topics import client_config


class HandoverError(Exception):
    """The handover could not be asked for or did not happen (one line, exit 1)."""


class Handover(NamedTuple):
    group: str
    to: str  # the instance that serves now
    seconds: float  # from the request to its announcement (two hosts' clocks)


def bootstrap_of(config: Config) -> str:
    """The cluster the pair uses: ``[kafka] bootstrap_servers``, else the embedded
    broker one of the instances started."""
    return config.kafka.bootstrap_servers or f"127.0.0.1:{config.kafka.embedded_port}"


def hand_over(config: Config, group: str, timeout_s: float) -> Handover:
    """Ask, and wait up to ``timeout_s`` for the new active's ``serving`` record."""
    kafka = client_config(config.kafka, bootstrap_of(config))
    try:
        count = group_members(kafka, group)
    except Exception as exc:  # noqa: BLE001 - said in one line
        raise HandoverError(f"cannot describe group {group}: "
                            f"{' '.join(str(exc).split())[:300]}") from None
    if count < 2:
        raise HandoverError(f"group {group} has {count} member(s): no standby to hand over "
                            f"to (the active would hand over to nobody)")
    topic = control_topic(group)
    since = end_offset(kafka, topic)
    asked = time.time()
    announce(kafka, topic, HANDOVER, "cli")
    found = wait_for(kafka, topic, SERVING, since, timeout_s)
    if found is None:
        raise HandoverError(f"no instance of group {group} said it serves within "
                            f"{timeout_s:g} s")
    return Handover(group, found.instance, round(max(0.0, found.at - asked), 2))

