"""The steps around the wait: join the pair, where to start once active, stepping down.

``join`` makes sure the control topic exists (one partition; created if missing, on the
embedded broker and on a site's cluster alike: it is the pair's own) and starts this
instance's ``Election``. ``start_from_kafka`` runs once the instance is active and before
its query starts: the offsets the pair committed to Kafka become the query's
``startingOffsets``, and this instance's stale checkpoint is moved aside so Spark does not
resume from it instead.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from kafka import TopicPartition

from appliance import logs
from appliance.config import Config
from appliance.ha.control import SERVING, announce, end_offset, wait_for
from appliance.ha.election import Election, ElectionSettings
from appliance.ha.instance import control_topic, instance_name
from appliance.ha.kafka_offsets import (
    first_start,
    group_offsets,
    reset_checkpoint,
    starting_offsets,
)
from appliance.query.checkpoint import committed_offsets
from appliance.topics import ensure_topics, offsets_consumer, partition_counts

log = logs.get_logger("appliance.ha")

#: How long an instance that hands over keeps its query running at most, waiting for its
#: partner to say it serves (elected at its next heartbeat, then its query's start).
HANDOVER_WAIT_S = 120.0


def join(config: Config, client_config: dict,
         processed: Callable[[], dict[int, int]] | None = None) -> Election:
    """This instance's election, started (``config``: the instance's own, see
    ``instance.instance_config``; ``processed``: see ``Election``)."""
    group = config.ha.group
    if group is None:
        raise RuntimeError("[ha] group is not set: no pair to join")
    ensure_control_topic(client_config, group)
    election = Election(ElectionSettings(
        group=group, instance=instance_name(config),
        session_timeout_ms=config.ha.session_timeout_ms, events_topic=config.topics.events,
        checkpoint_dir=Path(config.query.checkpoint_dir)), client_config,
        processed=processed)
    election.start()
    return election


def ensure_control_topic(client_config: dict, group: str) -> None:
    """The control topic exists (created with one partition if missing, or deleted since:
    ``ha.control_topic_created``)."""
    topic = control_topic(group)
    if partition_counts(client_config, [topic])[topic]:
        return
    ensure_topics(client_config, {topic: 1}, create=True)
    log.warning("ha.control_topic_created", group=group, topic=topic)


def start_from_kafka(config: Config, client_config: dict, partitions: int,
                     election: Election | None = None) -> str | None:
    """Where the newly active instance's query starts, said to ``election`` before the
    query serves (``Election.serve_from``): until then the election commits nothing,
    since this instance's checkpoint is the stale one of its last turn.

    The offsets the pair committed to Kafka, if any: they become the query's
    ``startingOffsets`` and this instance's stale checkpoint is moved aside. None yet
    (the pair's first start): its own checkpoint if that committed anything (None
    returned: Spark resumes it), else ``[query] starting_offsets`` made exact (``latest``
    as today's end offsets); that start is committed to the group as the pair's floor
    (``ha.offsets_floor``), so a partner taking over before this query's first commit
    starts there too, never later (a ``latest`` of its own would skip every event sent
    while neither served)."""
    group = config.ha.group
    if group is None:
        return None
    topic = config.topics.events
    committed = group_offsets(client_config, group, topic, partitions)
    if committed:
        moved = reset_checkpoint(config.query.checkpoint_dir)
        log.info("ha.offsets_from_kafka", group=group, topic=topic,
                 offsets={str(p): o for p, o in sorted(committed.items())},
                 stale_checkpoint=str(moved) if moved else None)
        if election is not None:
            election.serve_from(committed)
        return starting_offsets(topic, committed, partitions)
    own = committed_offsets(config.query.checkpoint_dir).get(topic, {})
    query_start = None
    if own:
        floor = own
    else:
        # A checkpoint that never committed would replay its first batch from wherever
        # that batch began: the start below is the exact one, so it goes aside.
        reset_checkpoint(config.query.checkpoint_dir)
        consumer = offsets_consumer(client_config)
        try:
            parts = [TopicPartition(topic, p) for p in range(partitions)]
            ends = {tp.partition: o for tp, o in consumer.end_offsets(parts).items()}
            beginnings = {tp.partition: o
                          for tp, o in consumer.beginning_offsets(parts).items()}
        finally:
            consumer.close()
        floor = first_start(config.query.starting_offsets, ends, beginnings)
        query_start = starting_offsets(topic, floor, partitions)
    took = election.serve_from(floor) if election is not None else False
    log.info("ha.offsets_floor" if took and floor else "ha.offsets_none", group=group,
             topic=topic, offsets={str(p): o for p, o in sorted(floor.items())},
             from_checkpoint=bool(own), starting_offsets=config.query.starting_offsets)
    return query_start


def announce_serving(election: Election, client_config: dict,
                     facts: dict[str, str] | None = None) -> None:
    """Tell the control topic this instance serves, and with which ``facts``
    (``partner``): an instance that handed over waits for it before stopping its own
    query, one that joins later compares its own facts with them."""
    try:
        announce(client_config, election.settings.control_topic, SERVING,
                 election.settings.instance, facts)
    except Exception as exc:  # noqa: BLE001 - the partner then stops after its bound
        log.warning("ha.announce_failed", error=" ".join(str(exc).split())[:300])


def step_down(election: Election, client_config: dict, stop_query: Callable[[], None],
              wait_s: float = HANDOVER_WAIT_S, stop: threading.Event | None = None) -> None:
    """Stop serving, to wait as a standby again (``Election.start`` next).

    Fenced: the partner may serve already, so the query stops first, then the membership
    ends. A handover: the membership ends first (the partner is elected at its next
    heartbeat), and the query stops once the partner says it serves, which it says once
    its query caught up with the events sent until its election (``ha.handed_over``)
    or after ``wait_s`` (or at once when ``stop`` is set: SIGTERM meanwhile): an overlap
    of the two, never a gap.
    """
    fenced = election.fenced()
    if fenced is not None:
        log.warning("ha.stepping_down", reason="fenced", instance=election.settings.instance)
        stop_query()
        election.close()
        return
    topic = election.settings.control_topic
    log.info("ha.stepping_down", reason="handover", instance=election.settings.instance)
    started = time.monotonic()
    since = end_offset(client_config, topic)
    election.close()
    partner = wait_for(client_config, topic, SERVING, since, wait_s,
                       not_from=election.settings.instance, stop=stop)
    stop_query()
    log.info("ha.handed_over", instance=election.settings.instance,
             to=partner.instance if partner is not None else None,
             seconds=round(time.monotonic() - started, 2))
