"""The steps around the wait: join the pair, and where to start once active.

``join`` makes sure the control topic exists (one partition; created if missing, on the
embedded broker and on a site's cluster alike: it is the pair's own) and starts this
instance's ``Election``. ``start_from_kafka`` runs once the instance is active and before
its query starts: the offsets the pair committed to Kafka become the query's
``startingOffsets``, and this instance's stale checkpoint is moved aside so Spark does not
resume from it instead.
"""

from __future__ import annotations

from pathlib import Path

from appliance import logs
from appliance.config import Config
from appliance.ha.election import Election, ElectionSettings
from appliance.ha.instance import control_topic, instance_name
from appliance.ha.kafka_offsets import group_offsets, reset_checkpoint, starting_offsets
from appliance.topics import ensure_topics

log = logs.get_logger("appliance.ha")


def join(config: Config, client_config: dict) -> Election:
    """This instance's election, started (``config``: the instance's own, see
    ``instance.instance_config``)."""
    group = config.ha.group
    if group is None:
        raise RuntimeError("[ha] group is not set: no pair to join")
    ensure_topics(client_config, {control_topic(group): 1}, create=True)
    election = Election(ElectionSettings(
        group=group, instance=instance_name(config),
        session_timeout_ms=config.ha.session_timeout_ms, events_topic=config.topics.events,
        checkpoint_dir=Path(config.query.checkpoint_dir)), client_config)
    election.start()
    return election


def start_from_kafka(config: Config, client_config: dict, partitions: int) -> str | None:
    """The query's ``startingOffsets`` from the offsets the pair committed to Kafka, this
    instance's checkpoint moved aside; None when the group has none yet (the pair's first
    start: the instance's own checkpoint, else ``[query] starting_offsets``)."""
    group = config.ha.group
    if group is None:
        return None
    topic = config.topics.events
    committed = group_offsets(client_config, group, topic, partitions)
    if not committed:
        log.info("ha.offsets_none", group=group, topic=topic,
                 starting_offsets=config.query.starting_offsets)
        return None
    moved = reset_checkpoint(config.query.checkpoint_dir)
    log.info("ha.offsets_from_kafka", group=group, topic=topic,
             offsets={str(p): o for p, o in sorted(committed.items())},
             stale_checkpoint=str(moved) if moved else None)
    return starting_offsets(topic, committed, partitions)
