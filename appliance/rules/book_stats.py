"""What each rule did since the appliance started, and the summaries an operator reads.

The rule book counts, per rule, the valid events it was evaluated on and those it matched
(``appliance.rules.rule_book``; executors report theirs to the driver). With thousands of
rules an operator asks three questions of these counts, answered here in one place for
the metrics (``appliance.observability.rules_metrics``), the ``/-/rules/stats`` page and
``appliance rules stats``:

- which rules alert most (the top k, the only per-rule series Prometheus gets);
- which never matched (a threshold nobody crosses, or a rule that cannot be true);
- which no event even reached: the index never found an event with the value they require
  (``metric = 'cpu.utl'``: a metric name nobody sends).

Pure Python: the CLI reads a page of it without Spark.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

#: The page's path on the appliance's metrics endpoint.
PAGE_PATH = "/-/rules/stats"


@dataclass(frozen=True)
class RuleCounts:
    """One rule's counts since the book opened (summed over its versions, by rule id)."""

    id: str
    evaluated: int         # valid events it was evaluated on
    matched: int           # of those, the ones it matched
    index_key: str | None  # the key it is indexed by (``metric``...); None: every event


@dataclass(frozen=True)
class BookStats:
    """Per-rule counts for the running version's rules, in file order."""

    version: str | None
    events: int    # valid events evaluated since the book opened
    frontier: int  # the highest epoch or batch a task has entered (-1: none)
    rules: tuple[RuleCounts, ...]

    @property
    def evaluations(self) -> int:
        return sum(r.evaluated for r in self.rules)

    @property
    def rules_per_event(self) -> float:
        """Rules evaluated per valid event: what the index saves against the rule count."""
        return self.evaluations / self.events if self.events else 0.0

    def top(self, k: int) -> list[RuleCounts]:
        """The ``k`` rules that matched most (ties by id), those that matched at all."""
        hits = [r for r in self.rules if r.matched > 0]
        return sorted(hits, key=lambda r: (-r.matched, r.id))[:k]

    def unmatched(self) -> list[RuleCounts]:
        """Rules that matched no event yet."""
        return [r for r in self.rules if r.matched == 0]

    def unreached(self) -> list[RuleCounts]:
        """Indexed rules no event reached (none had the value they require), once events
        were seen: with the events so far, they cannot match."""
        if self.events == 0:
            return []
        return [r for r in self.rules if r.evaluated == 0 and r.index_key is not None]

    def page(self, k: int) -> dict[str, object]:
        """The ``/-/rules/stats`` document."""
        return {
            "version": self.version, "events": self.events, "frontier": self.frontier,
            "rules": len(self.rules), "rules_per_event": round(self.rules_per_event, 3),
            "top": [asdict(r) for r in self.top(k)],
            "unmatched": [r.id for r in self.unmatched()],
            "unreached": [asdict(r) for r in self.unreached()],
            "counts": [asdict(r) for r in self.rules],
        }

    @classmethod
    def from_page(cls, page: dict) -> BookStats:
        return cls(version=page["version"], events=page["events"], frontier=page["frontier"],
                   rules=tuple(RuleCounts(**r) for r in page["counts"]))


EMPTY = BookStats(version=None, events=0, frontier=-1, rules=())


def report(stats: BookStats, top: int, listed: int = 20) -> str:
    """``appliance rules stats``: the counts an operator reads, as text."""
    lines = [f"rules version {stats.version}: {len(stats.rules)} rules, {stats.events} valid "
             f"events evaluated, {stats.rules_per_event:.2f} rules tried per event"]
    best = stats.top(top)
    if best:
        width = max(len(r.id) for r in best)
        lines.append(f"top {len(best)} by alerts:")
        lines += [f"  {r.id:<{width}}  {r.matched:>10} alerts of {r.evaluated} events tried"
                  for r in best]
    unmatched = stats.unmatched()
    lines.append(f"never matched: {len(unmatched)} rules"
                 + (f": {', '.join(r.id for r in unmatched[:listed])}"
                    + (", ..." if len(unmatched) > listed else "") if unmatched else ""))
    unreached = stats.unreached()
    lines.append(f"no event reached: {len(unreached)} rules"
                 + (" (no event had the value they require)" if unreached else ""))
    lines += [f"  {r.id} (indexed by {r.index_key})" for r in unreached[:listed]]
    if len(unreached) > listed:
        lines.append(f"  ... and {len(unreached) - listed} more")
    return "\n".join(lines)
