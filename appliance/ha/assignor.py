"""The pair's assignor: the control partition stays with its newest owner.

Kafka's group leader (one of the members) runs the assignor. kafka-python's
cooperative-sticky one sends its subscriptions at version 1, without the member's
generation, so when two members claim the partition it resolves the conflict by chance.
Two do claim it after a freeze: an active instance stopped past its session (SIGSTOP, a
paused VM) resumes, and its consumer rejoins still claiming the partition it held, while
the standby that took over in the meantime claims it too. Given to the resumed one, the
role would flap back to the instance that was just fenced. This assignor sends version 2
subscriptions, with the generation in which the member got its partitions, and gives each
claimed partition to its newest claimant (Java's sticky assignors do the same); an
unclaimed partition goes to the member first in member-id order. Cooperative: an owner
that keeps its partition is never asked to give it up.
"""

from __future__ import annotations

from collections import defaultdict

from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
from kafka.protocol.consumer.metadata import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
)
from kafka.structs import TopicPartition

#: ConsumerProtocolSubscription version 2 added the member's generation (KIP-792).
SUBSCRIPTION_VERSION = 2


class NewestOwnerAssignor(CooperativeStickyAssignor):
    """Every member of a pair runs this one (same name): see the module docstring."""

    name = "appliance-ha"
    version = SUBSCRIPTION_VERSION

    def metadata(self, topics):
        owned = super().metadata(topics).owned_partitions
        return ConsumerProtocolSubscription(
            version=SUBSCRIPTION_VERSION, topics=sorted(topics), user_data=b"",
            owned_partitions=owned, generation_id=self.generation if owned else -1)

    def assign(self, cluster, members):
        parsed = {m.member_id: self.parse_member_metadata(m.metadata) for m in members}
        newest: dict[TopicPartition, tuple[int, str]] = {}
        for member_id, meta in sorted(parsed.items()):
            for tp in meta.partitions:
                claim = (meta.generation, member_id)
                if tp not in newest or claim[0] > newest[tp][0]:
                    newest[tp] = claim
        out: dict[str, dict[str, list[int]]] = {m: defaultdict(list) for m in parsed}
        for topic in sorted({t for meta in parsed.values() for t in meta.subscription}):
            readers = sorted(m for m, meta in parsed.items() if topic in meta.subscription)
            for part in sorted(cluster.partitions_for_topic(topic) or ()):
                tp = TopicPartition(topic, part)
                owner = newest[tp][1] if tp in newest else readers[part % len(readers)]
                out[owner][topic].append(part)
        return {m: ConsumerProtocolAssignment(
                    self.version, sorted((t, sorted(ps)) for t, ps in parts.items()), b"")
                for m, parts in out.items()}
