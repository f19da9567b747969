"""``[ha]`` in the runner's lifecycle: when this instance of a pair serves, and when not.

Before Spark starts, an instance that would run another query than its pair's live active
one is refused (``appliance.ha.partner``). After the warm-up it joins the pair's group and
waits as the standby, checking its control topic and re-warming now and then, until Kafka
elects it; its query then starts from the offsets the pair committed to Kafka, and it says
it serves once that query has caught up with the events sent until its election. Fenced, or
asked to hand over, it steps down (``appliance.ha.takeover``), waits again and serves
again when elected, in the same process.

The runner owns the query; this module owns the order of those steps: the two start-up
steps it repeats are the runner's (``PairHost``), the rest it reads from the run's settings,
its rules and its query's probes.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol

from appliance import logs
from appliance.config import Config
from appliance.ha.election import Election
from appliance.ha.partner import PartnerMismatch, check_partner, pair_facts
from appliance.ha.takeover import (
    announce_serving,
    ensure_control_topic,
    join,
    start_from_kafka,
    step_down,
)
from appliance.process.query_probes import READY_TIMEOUT_S, QueryProbes
from appliance.process.run_settings import RunSettings
from appliance.process.running_rules import RunningRules
from appliance.topics import end_offsets, offsets_consumer

log = logs.get_logger("appliance")

#: How often a waiting standby checks its control topic and whether a re-warm is due.
STANDBY_CHECK_S = 10.0
#: How long a newly active instance waits, at most, to catch up before it says it serves
#: anyway (a backlog that takes longer: the partner that handed over then stops, and the
#: rest of the backlog waits for this query).
CATCH_UP_WAIT_S = 60.0


class StoppedAsStandby(Exception):
    """SIGTERM/SIGINT came while this instance waited as a pair's standby (exit 0)."""


class PairHost(Protocol):
    """The start-up steps a pair repeats (``appliance.process.runner.Appliance``)."""

    def warm_up(self) -> float:
        """The warm-up again; its seconds."""
        ...

    def start_query(self, starting_offsets: str | None) -> None:
        """Start the query from ``starting_offsets`` (the pair's, in Kafka)."""
        ...

    def plan_query(self) -> float:
        """Plan the next start's query ahead; its seconds."""
        ...


class PairTurns:
    """This instance's turns in its pair; ``election`` once it joined."""

    def __init__(self, host: PairHost, settings: RunSettings, partitions: int,
                 rules: RunningRules, probes: QueryProbes) -> None:
        """``settings.config``: the instance's own
        (``appliance.ha.instance.instance_config``)."""
        self.host = host
        self.config: Config = settings.config
        self.settings = settings
        self.partitions = partitions
        self.rules = rules
        self.probes = probes
        self.election: Election | None = None
        self.starting_offsets: str | None = None  # the pair's offsets in Kafka, once elected

    def facts(self) -> dict[str, str]:
        return pair_facts(self.config, self.rules.running_rules().version)

    def check_partner(self) -> str | None:
        """The one line refusing this instance (exit 2), or None."""
        try:
            check_partner(self.config, self.settings.client(), self.facts())
        except PartnerMismatch as exc:
            return str(exc)
        return None

    def await_turn(self, stop: threading.Event) -> None:
        """Join (again), wait warm as the standby until elected, then take the pair's
        offsets in Kafka as the next start's (``starting_offsets``); ``StoppedAsStandby``
        if ``stop`` came first."""
        client = self.settings.client()
        group = self.config.ha.group or ""
        election = self.election
        if election is None:
            events = self.config.topics.events
            election = self.election = join(self.config, client,
                                            lambda: self.probes.processed(events))
        else:
            ensure_control_topic(client, group)
            election.start()  # after a step down
        self.plan_ahead()
        rewarm_s = self.config.ha.rewarm_s
        next_warmup = time.monotonic() + (rewarm_s or 0.0)
        while not election.wait_active(stop, timeout_s=STANDBY_CHECK_S):
            if stop.is_set():
                raise StoppedAsStandby()
            ensure_control_topic(client, group)  # deleted: nobody would be elected
            if rewarm_s is not None and time.monotonic() >= next_warmup \
                    and self.config.query.warmup:
                next_warmup = time.monotonic() + rewarm_s
                self.rewarm()
        self.starting_offsets = start_from_kafka(self.config, client, self.partitions,
                                                 election)

    def catch_up_target(self) -> dict[int, int] | None:
        """The events topic's end offsets now (its query processes: every event sent
        until the election is below them); None if Kafka cannot say (the instance then
        says it serves once its query processes, as a lone one). Read after the query
        started, not at the election: the takeover's start does not wait for it."""
        events = self.config.topics.events
        try:
            consumer = offsets_consumer(self.settings.client())
            try:
                return end_offsets(consumer, [events])[events]
            finally:
                consumer.close()
        except Exception as exc:  # noqa: BLE001 - said in one line; serving goes on
            log.warning("ha.catch_up_unknown", error=" ".join(str(exc).split())[:300])
            return None

    def catch_up(self, stop: threading.Event | None = None) -> None:
        """Wait until the query processed every event in the topic when it began to
        process, so every one sent until the election (``ha.caught_up``), at most
        ``CATCH_UP_WAIT_S`` (``ha.catch_up_slow``). A partner that handed over keeps its
        query running until this instance says it serves: had it stopped when the new
        query merely ran, the events sent meanwhile would wait for the new query's first
        reads (on the test bed, executors fresh after a worker's drain took 3.6-7 s from
        the first epoch to the first alert)."""
        target = self.catch_up_target()
        if not target:
            return
        started = time.monotonic()
        topic = self.config.topics.events
        caught = self.probes.wait_until_past(topic, target, CATCH_UP_WAIT_S, stop)
        seconds = round(time.monotonic() - started, 2)
        if stop is not None and stop.is_set():
            return
        offsets = {str(p): o for p, o in sorted(target.items())}
        if caught:
            log.info("ha.caught_up", topic=topic, offsets=offsets, seconds=seconds)
        else:
            log.warning("ha.catch_up_slow", topic=topic, offsets=offsets, seconds=seconds,
                        processed={str(p): o for p, o in
                                   sorted(self.probes.processed(topic).items())})

    def plan_ahead(self) -> None:
        """Plan the takeover's query while waiting (``ha.planned``): once elected, only
        Spark's start of it is left to pay."""
        try:
            seconds = self.host.plan_query()
        except Exception as exc:  # noqa: BLE001 - planned at the takeover instead
            log.warning("ha.plan_failed", error=" ".join(str(exc).split())[:500])
            return
        log.info("ha.planned", seconds=round(seconds, 3))

    def rewarm(self) -> None:
        """The warm-up again: the query's code stays compiled, the producer connected."""
        try:
            seconds = self.host.warm_up()
        except Exception as exc:  # noqa: BLE001 - a colder standby, not a dead one
            log.warning("ha.rewarm_failed", error=" ".join(str(exc).split())[:500])
            return
        log.info("ha.rewarmed", seconds=seconds)

    def serving(self, stop: threading.Event | None = None) -> None:
        """``ha.active``: the query serves (caught up, ``catch_up``), this long after Kafka
        elected this instance."""
        election = self.election
        if election is None or election.active_at is None:
            return
        self.catch_up(stop)
        if stop is not None and stop.is_set():
            return  # SIGTERM while catching up: it does not say it serves, it stops
        took = time.monotonic() - election.active_at
        election.served(took)
        self.announce()
        log.info("ha.active", group=self.config.ha.group, instance=election.settings.instance,
                 takeover_s=round(took, 2), takeovers=election.takeovers,
                 starting_offsets=self.starting_offsets)

    def announce(self) -> None:
        """This instance serves, with what its partner must agree on (also after a
        rules reload it applied)."""
        if self.election is not None:
            announce_serving(self.election, self.settings.client(), self.facts())

    def must_step_down(self) -> bool:
        election = self.election
        return election is not None and bool(election.fenced() or
                                             election.handover_requested())

    def serve_again(self, stop: threading.Event) -> bool:
        """Fenced or asked to hand over: step down, wait warm as the standby, serve again
        once elected; False if the query then does not process (exit 1),
        ``StoppedAsStandby`` if ``stop`` came while waiting."""
        election = self.election
        if election is None:
            raise RuntimeError("no pair to step down in: await_turn() comes first")

        def stop_query() -> None:
            query = self.probes.query
            if query is not None:
                query.stop()

        step_down(election, self.settings.client(), stop_query, stop=stop)
        self.await_turn(stop)
        self.host.start_query(self.starting_offsets)
        if not self.probes.wait_until_processing(READY_TIMEOUT_S):
            log.error("query.failed", cause=f"query did not process after a takeover: "
                                            f"{self.probes.failure() or 'timeout'}")
            return False
        self.serving(stop)
        return True

    def close(self) -> None:
        """The last offsets to Kafka and out of the group at once."""
        if self.election is not None:
            self.election.close()
