"""``--max-groups``: one cap over classic and KIP-848 groups together, one refusal.

Both coordinators ask before they create a group; each counts its own groups plus the
other's, so the broker never holds more than the cap in all.
"""

from __future__ import annotations

from appliance import logs

log = logs.get_logger("appliance.broker")


def room_for_group(group_id: str, held: int, limit: int) -> bool:
    """True while ``held`` groups leave room under ``limit``; else one warning naming the
    setting, and False (the caller answers Kafka's error)."""
    if held < limit:
        return True
    log.warning("broker.groups_at_max", group=group_id, limit=limit, setting="--max-groups")
    return False
