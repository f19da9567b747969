"""Seeded random rule sets and events for the differential tests of the rule book.

The rules mix what the index files under a key (``metric = ...``, ``source IN (...)``,
``tags['env'] = ...``, an OR of equalities on one key, an equality after other conjuncts)
with what it cannot (no equality, ``NOT``, a function of the field, a collated or cast
comparison) and what is easy to get wrong (null-safe equality, NULL in an IN list, absent
tags, LIKE patterns, higher-order functions with lambdas, intervals and kinds that can
raise, overlapping rules, every severity). The events mix valid ones over the same
vocabulary with edge values and bad records (every dead-letter reason).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass

from appliance.rules.rule_types import check
from appliance.rules.rules_file import SEVERITIES, Rule, RuleSet

METRICS = ("cpu.util", "mem.used_pct", "disk.used_pct", "net.rx", "load.1m", "CPU.util",
           "cpu.util ", "é.metric", "")
SOURCES = ("host-1", "host-2", "host-10", "host-20", "db-1", "db-2", "", "HOST-1", "h%_x")
ENVS = ("prod", "staging", "dev", "")
VALUES = (0.0, -0.0, 1.0, 50.0, 89.999, 90.0, 90.5, 100.0, -5.0, 1e308, -1e308, 1e-300, 42)


def _lit(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _indexable(rng: random.Random) -> str:
    kind = rng.randrange(8)
    if kind == 0:
        return f"metric = {_lit(rng.choice(METRICS))}"
    if kind == 1:
        return f"{_lit(rng.choice(METRICS))} = metric"
    if kind == 2:
        picked = rng.sample(METRICS, rng.randint(1, 3))
        return f"metric IN ({', '.join(_lit(m) for m in picked)})"
    if kind == 3:
        return f"source = {_lit(rng.choice(SOURCES))}"
    if kind == 4:
        return f"tags['env'] = {_lit(rng.choice(ENVS))}"
    if kind == 5:
        a, b = rng.sample(METRICS, 2)
        return f"(metric = {_lit(a)} OR metric = {_lit(b)})"
    if kind == 6:
        return f"metric <=> {_lit(rng.choice(METRICS))}"
    return f"metric IN ({_lit(rng.choice(METRICS))}, NULL)"


LIKE_PATTERNS = ("host-%", "host-1%", "db_%", "%", "h\\%%")
REGEXES = ("^cpu", "util$", "\\.")


def _residual(rng: random.Random) -> str:
    return rng.choice([
        f"value > {rng.choice(VALUES)}",
        f"value >= {rng.choice(VALUES)} AND value < {rng.choice(VALUES)}",
        f"source LIKE {_lit(rng.choice(LIKE_PATTERNS))}",
        f"NOT (metric = {_lit(rng.choice(METRICS))})",
        f"lower(metric) = {_lit('cpu.util')}",
        "tags['env'] IS NULL",
        "tags IS NULL",
        f"coalesce(tags['dc'], 'none') = {_lit(rng.choice(['a', 'b', 'none']))}",
        f"metric RLIKE {_lit(rng.choice(REGEXES))}",
        f"cast(source AS int) IS NULL OR value < {rng.choice(VALUES)}",
        f"ts > {rng.choice([0, 1.7e12, 2e12])}",
        "startswith(source, 'host')",
        f"value / 0 IS NULL AND metric != {_lit(rng.choice(METRICS))}",
        "size(tags) > 1",
        f"element_at(tags, 'env') = {_lit(rng.choice(ENVS))}",
        "event_id LIKE 'e-1%'",
        # Higher-order functions: lambda variables hold an element while the lambda runs.
        f"exists(map_keys(tags), k -> k = {_lit(rng.choice(['env', 'dc']))})",
        f"forall(map_values(tags), v -> v != {_lit(rng.choice(ENVS))})",
        "aggregate(map_keys(tags), 0, (n, k) -> n + length(k)) > 3",
        f"size(map_filter(tags, (k, v) -> v = {_lit(rng.choice(ENVS))})) > 0",
        f"exists(array(metric, source), x -> x LIKE {_lit(rng.choice(LIKE_PATTERNS))})",
        # Kinds that can raise (whatever ANSI says), never for these events: before an
        # equality, they keep the rule out of the index.
        "assert_true(value <= 1e308) IS NULL",
        f"CAST(CAST(value AS BIGINT) % 100 AS INTERVAL DAY) < INTERVAL '{rng.randint(0, 99)}' DAY",
        "if(value > 1e308, raise_error('huge'), true)",
    ])


def random_rule(rng: random.Random, i: int) -> Rule:
    """A rule the check accepts: shapes that can never match (two values for one field, an
    empty range) are drawn again."""
    while True:
        rule = _any_rule(rng, i)
        if not check(rule.when):
            return rule


def _any_rule(rng: random.Random, i: int) -> Rule:
    shape = rng.randrange(5)
    if shape == 0:
        when = _residual(rng)
    elif shape == 1:
        when = _indexable(rng)
    elif shape == 2:
        when = f"{_indexable(rng)} AND {_residual(rng)}"
    elif shape == 3:
        when = f"{_residual(rng)} AND {_indexable(rng)}"  # indexed after other conjuncts
    else:
        when = f"{_indexable(rng)} AND {_indexable(rng)} AND {_residual(rng)}"
    severity = SEVERITIES[i % len(SEVERITIES)]
    return Rule(id=f"r{i}", severity=severity, when=when, message=f"rule {i}: {when}"[:200])


def random_rule_set(seed: int, count: int) -> RuleSet:
    rng = random.Random(seed)
    return RuleSet.of([random_rule(rng, i) for i in range(count)], source=f"seed-{seed}")


@dataclass(frozen=True)
class Records:
    values: list[bytes]


BAD = [b"", b"{", b"[1, 2]", b"\xff\xfe", b'{"event_id": 1}',
       b'{"event_id": "x", "ts": 1, "source": "s", "metric": "m", "value": "high"}',
       b'{"event_id": "x", "ts": 1, "source": "s", "metric": "m", "value": 1, "tags": {"a": 1}}',
       b'{"event_id": "x", "ts": 1, "source": "s", "metric": "m", "value": NaN}',
       b'{"event_id": "x", "ts": 1, "source": "s", "metric": "m"}']


def random_events(seed: int, count: int, bad_every: int = 17) -> list[bytes]:
    """``count`` records: valid events over the rules' vocabulary, and every ``bad_every``-th
    a bad record."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        if i % bad_every == bad_every - 1:
            out.append(rng.choice(BAD))
            continue
        event: dict = {"event_id": f"e-{seed}-{i}", "ts": rng.choice([1.7e12 + i, 0, 2.5e12]),
                       "source": rng.choice(SOURCES), "metric": rng.choice(METRICS),
                       "value": rng.choice(VALUES) if rng.random() < 0.5
                       else round(rng.uniform(-10, 110), 3)}
        tags = rng.randrange(4)
        if tags == 1:
            event["tags"] = {"env": rng.choice(ENVS)}
        elif tags == 2:
            event["tags"] = {"env": rng.choice(ENVS), "dc": rng.choice(["a", "b"])}
        elif tags == 3:
            event["tags"] = {}
        if rng.random() < 0.05:
            event["extra"] = {"ignored": True}
        out.append(json.dumps(event, ensure_ascii=rng.random() < 0.5).encode())
    return out
