"""What ``bench.broker_group_churn`` makes of a run: the members' assignment callbacks and
every record they consumed, turned into figures per churn event.

Kept apart from the orchestration so the rules are in one place: when a group counts as
balanced (``balanced``), which consumption of a record is its first and which are
duplicates, what a gap in a partition's consumption is, and which event a figure belongs
to (the window from that event to the next).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from bench._churn_member import RECORD

RECORD_DTYPE = np.dtype([("partition", "<i4"), ("offset", "<i8"), ("send_ns", "<i8"),
                         ("recv_ns", "<i8")])
assert RECORD_DTYPE.itemsize == RECORD.size


def balanced(owned: Iterable[frozenset[int] | None], partitions: int) -> bool:
    """Every partition owned by exactly one of the live members, and each member owning its
    fair share (``partitions // n`` or one more): what every assignor here ends at."""
    sets = list(owned)
    if not sets or any(s is None for s in sets):
        return False
    every = [p for s in sets for p in s]  # type: ignore[union-attr]
    if len(every) != len(set(every)) or set(every) != set(range(partitions)):
        return False
    low = partitions // len(sets)
    return all(low <= len(s) <= low + 1 for s in sets)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Change:
    """One step of the group's history: a member's callback (``owned``), a member starting
    (``owned`` None: live, owning nothing yet), or the bench ending one (``gone``: from
    then on it is not a live member)."""

    ns: int
    member: str
    owned: frozenset[int] | None
    gone: bool = False


@dataclass(frozen=True)
class Event:
    name: str  # "join 2/4", "leave 4->3", "kill 2->1", "steady"
    ns: int  # when it happened (the joiner's subscribe(), the signal)


def balanced_after(history: list[Change], since_ns: int, partitions: int) -> int | None:
    """The first time at or after ``since_ns`` the live members were balanced."""
    live: dict[str, frozenset[int] | None] = {}
    reached = False
    for ch in sorted(history, key=lambda c: c.ns):
        if ch.ns > since_ns and not reached:  # the group as it was at since_ns
            reached = True
            if balanced(live.values(), partitions):
                return since_ns
        if ch.gone:
            live.pop(ch.member, None)
        else:
            live[ch.member] = ch.owned
        if reached and balanced(live.values(), partitions):
            return ch.ns
    return since_ns if not reached and balanced(live.values(), partitions) else None


def overlaps(history: list[Change]) -> int:
    """How many times a callback left a partition owned by two live members at once."""
    live: dict[str, frozenset[int] | None] = {}
    count = 0
    for ch in sorted(history, key=lambda c: c.ns):
        if ch.gone:
            live.pop(ch.member, None)
            continue
        live[ch.member] = ch.owned
        every = [p for s in live.values() if s for p in s]
        count += len(every) != len(set(every))
    return count


def load(paths: Iterable) -> np.ndarray:
    chunks = []
    for path in paths:
        data = open(path, "rb").read()
        whole = len(data) - len(data) % RECORD_DTYPE.itemsize  # a kill -9 mid-write
        chunks.append(np.frombuffer(data[:whole], dtype=RECORD_DTYPE))
    return np.concatenate(chunks) if chunks else np.empty(0, dtype=RECORD_DTYPE)


@dataclass
class Consumed:
    """Every consumption, sorted by (partition, offset, receive time); ``first`` marks each
    record's first consumption, the rest are duplicates."""

    recs: np.ndarray
    first: np.ndarray

    @classmethod
    def of(cls, recs: np.ndarray) -> Consumed:
        order = np.lexsort((recs["recv_ns"], recs["offset"], recs["partition"]))
        recs = recs[order]
        first = np.ones(len(recs), dtype=bool)
        first[1:] = ((recs["partition"][1:] != recs["partition"][:-1])
                     | (recs["offset"][1:] != recs["offset"][:-1]))
        return cls(recs, first)

    def missing(self, end_offsets: dict[int, int]) -> dict[int, int]:
        """Per partition, how many offsets below its end nobody consumed."""
        out = {}
        firsts = self.recs[self.first]
        for p, end in end_offsets.items():
            offs = firsts["offset"][firsts["partition"] == p]
            got = int(np.count_nonzero((offs >= 0) & (offs < end)))
            if got != end:
                out[p] = end - got
        return out


def _percentiles(latencies_ms: np.ndarray) -> dict:
    if len(latencies_ms) == 0:
        return {"n": 0, "p50_ms": None, "p99_ms": None, "max_ms": None}
    p50, p99 = np.percentile(latencies_ms, [50, 99])
    return {"n": int(len(latencies_ms)), "p50_ms": round(float(p50), 1),
            "p99_ms": round(float(p99), 1), "max_ms": round(float(latencies_ms.max()), 1)}


def per_second(consumed: Consumed, start_ns: int, end_ns: int) -> list[dict]:
    """End-to-end latency (send to receive) of first consumptions, by second received."""
    firsts = consumed.recs[consumed.first]
    sec = (firsts["recv_ns"] - start_ns) // 1_000_000_000
    lat = (firsts["recv_ns"] - firsts["send_ns"]) / 1e6
    out = []
    for s in range(int((end_ns - start_ns) // 1_000_000_000) + 1):
        out.append({"second": s, **_percentiles(lat[sec == s])})
    return out


def event_figures(consumed: Consumed, history: list[Change], events: list[Event],
                  start_ns: int, end_ns: int, partitions: int) -> list[dict]:
    """Per event, over its window (until the next event, the last one until ``end_ns``):
    seconds until balanced, the longest gap between two first consumptions of one
    partition that ended in the window (so a stall that began before counts whole), the
    latency of the records first consumed in it, and the duplicates consumed in it."""
    recs, first = consumed.recs, consumed.first
    firsts = recs[first]
    dups = recs[~first]
    gaps_end = np.empty(0, dtype=np.int64)
    gaps_len = np.empty(0, dtype=np.int64)
    gaps_part = np.empty(0, dtype=np.int32)
    for p in range(partitions):
        t = np.sort(firsts["recv_ns"][firsts["partition"] == p])
        if len(t) > 1:
            gaps_end = np.concatenate([gaps_end, t[1:]])
            gaps_len = np.concatenate([gaps_len, np.diff(t)])
            gaps_part = np.concatenate([gaps_part, np.full(len(t) - 1, p, dtype=np.int32)])
    out = []
    for i, ev in enumerate(events):
        stop = events[i + 1].ns if i + 1 < len(events) else end_ns
        at = balanced_after(history, ev.ns, partitions)
        in_window = (firsts["recv_ns"] >= ev.ns) & (firsts["recv_ns"] < stop)
        lat = (firsts["recv_ns"][in_window] - firsts["send_ns"][in_window]) / 1e6
        g = (gaps_end >= ev.ns) & (gaps_end < stop)
        longest = int(np.argmax(gaps_len[g])) if g.any() else None
        out.append({
            "event": ev.name, "at_s": round((ev.ns - start_ns) / 1e9, 2),
            "balanced_s": None if at is None else round((at - ev.ns) / 1e9, 3),
            "longest_gap_ms": None if longest is None else round(
                float(gaps_len[g][longest]) / 1e6, 1),
            "longest_gap_partition": None if longest is None else int(gaps_part[g][longest]),
            "latency": _percentiles(lat),
            "duplicates": int(np.count_nonzero((dups["recv_ns"] >= ev.ns)
                                               & (dups["recv_ns"] < stop))),
        })
    return out
