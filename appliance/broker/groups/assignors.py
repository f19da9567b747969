"""Server-side assignors of KIP-848 consumer groups: who should own which partition.

Under the consumer protocol the broker, not a leader member, computes the group's target
assignment whenever the group epoch moves (a member came, went or changed its
subscription; a subscribed topic appeared or grew). A member picks one with
``group.remote.assignor``; Kafka's two are served:

- ``uniform`` (the default): every partition of the subscribed topics spread so members
  differ by at most one partition where their subscriptions allow, and sticky: a member
  keeps what it already had up to its share (rounded down, and one more for as many
  members as the division leaves over), so a join or leave moves only what it must.
- ``range``: per topic, the members subscribed to it (by member id) take contiguous ranges,
  the first ones one partition more when the count does not divide.

Pure functions of their inputs: the coordinator (``consumer_groups``) owns the epochs and
the reconciliation of what members own towards this target.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import NamedTuple

# member id -> topic -> partitions
Assignment = dict[str, dict[str, frozenset[int]]]


class AssignorInput(NamedTuple):
    subscriptions: Mapping[str, frozenset[str]]  # member id -> the topics it reads
    partitions: Mapping[str, int]  # topic -> partition count (existing topics only)
    current: Mapping[str, Mapping[str, frozenset[int]]]  # the previous target


def _as_assignment(members: Mapping[str, frozenset[str]],
                   owned: Mapping[str, set[tuple[str, int]]]) -> Assignment:
    out: Assignment = {}
    for member in members:
        topics: dict[str, set[int]] = {}
        for topic, partition in owned.get(member, ()):
            topics.setdefault(topic, set()).add(partition)
        out[member] = {t: frozenset(p) for t, p in topics.items()}
    return out


def uniform(spec: AssignorInput) -> Assignment:
    members = sorted(spec.subscriptions)
    if not members:
        return {}
    wanted = sorted((topic, p) for topic, count in spec.partitions.items()
                    if any(topic in spec.subscriptions[m] for m in members)
                    for p in range(count))
    # each member's fair share of what it may read: the partitions it subscribes to,
    # divided among everyone who reads them too, rounded down (``floor``); some may have
    # one more, as many as the division leaves over
    floor = {}
    for m in members:
        mine = [tp for tp in wanted if tp[0] in spec.subscriptions[m]]
        readers = {o for o in members if spec.subscriptions[o] & spec.subscriptions[m]}
        floor[m] = len(mine) // max(len(readers), 1)
    had = {m: sorted((t, p) for t, parts in spec.current.get(m, {}).items() for p in parts
                     if t in spec.subscriptions[m] and p < spec.partitions.get(t, 0))
           for m in members}
    owned: dict[str, set[tuple[str, int]]] = {m: set() for m in members}
    taken: set[tuple[str, int]] = set()

    def keep(m: str, up_to: int) -> None:
        for tp in had[m]:
            if len(owned[m]) >= up_to:
                return
            if tp not in taken:
                owned[m].add(tp)
                taken.add(tp)

    for m in members:  # stickiness: keep what it had, up to its share
        keep(m, floor[m])
    # ... and one more where that still leaves enough to bring everyone to their share:
    # rounding every share up instead let three members keep two partitions each of six
    # when a fourth joined, which then got none (bench.broker_group_churn found it)
    for m in sorted(members, key=lambda m: (-len(had[m]), m)):
        short = sum(max(floor[o] - len(owned[o]), 0) for o in members)
        if len(wanted) - len(taken) > short:
            keep(m, floor[m] + 1)
    for tp in wanted:  # the rest to the least loaded member that reads the topic
        if tp in taken:
            continue
        candidates = [m for m in members if tp[0] in spec.subscriptions[m]]
        best = min(candidates, key=lambda m: (len(owned[m]), m))
        owned[best].add(tp)
        taken.add(tp)
    return _as_assignment(spec.subscriptions, owned)


def range_(spec: AssignorInput) -> Assignment:
    owned: dict[str, set[tuple[str, int]]] = {m: set() for m in spec.subscriptions}
    for topic, count in sorted(spec.partitions.items()):
        readers = sorted(m for m, topics in spec.subscriptions.items() if topic in topics)
        if not readers:
            continue
        base, extra = divmod(count, len(readers))
        start = 0
        for i, m in enumerate(readers):
            n = base + (1 if i < extra else 0)
            owned[m].update((topic, p) for p in range(start, start + n))
            start += n
    return _as_assignment(spec.subscriptions, owned)


ASSIGNORS: dict[str, Callable[[AssignorInput], Assignment]] = {
    "uniform": uniform, "range": range_}
DEFAULT_ASSIGNOR = "uniform"  # Kafka's first of group.consumer.assignors
