"""What the two instances of a pair must agree on, and refusing an instance that does not.

A pair runs one query: whichever instance serves, the same events must give the same
alerts on the same topics. The active instance's ``serving`` announcement carries these
facts (``control``); an instance about to join a group that has members compares its own
with the newest announcement and refuses to start (exit 2, before Spark starts) when one
differs, naming it. To change one of them, stop both instances first: while one of them
serves, the other is refused until they agree.
"""

from __future__ import annotations

from appliance.config import Config
from appliance.ha.control import SERVING, group_members, latest
from appliance.ha.instance import control_topic, instance_name


class PartnerMismatch(Exception):
    """This instance's config differs from its pair's active instance (one line)."""


def pair_facts(config: Config, rules_version: str) -> dict[str, str]:
    """The settings both instances of a pair must share, by the key that sets each."""
    return {"query.trigger": config.query.trigger, "rules.version": rules_version,
            "topics.events": config.topics.events, "topics.alerts": config.topics.alerts,
            "topics.dead_letters": config.topics.dead_letters}


def check_partner(config: Config, client_config: dict, facts: dict[str, str]) -> None:
    """Raise ``PartnerMismatch`` if a live pair's active instance announced other facts."""
    group = config.ha.group
    if group is None or group_members(client_config, group) == 0:
        return  # no partner now: this instance's settings are the pair's
    active = latest(client_config, control_topic(group), SERVING)
    if active is None or active.instance == instance_name(config):
        return
    for key, mine in facts.items():
        theirs = active.facts.get(key)
        if theirs is not None and theirs != mine:
            raise PartnerMismatch(
                f"ha.group {group}: {key} is {mine!r} here but {theirs!r} on the pair's "
                f"active instance {active.instance}: both instances of a pair run one "
                f"query (make them agree, or stop both to change it)")
