"""Seeded rules files of any size, shaped like an operator's generated from a catalogue.

``rules_file(n)``: the shipped example's ``cpu-critical`` rule (what the benchmarks' driver
events alert on) and ``n - 1`` more, each an equality on one of ``METRICS`` metric names plus
a threshold, a third of them with ``AND source LIKE 'host-N%'``: the shape the rules-at-scale
issue measured. One metric name in ``METRICS`` is ``cpu.util``, the driver's, so about
``n / METRICS`` of the rules are candidates for every driver event: the index cannot skip
them, and each is evaluated per event. Their thresholds lie above every value the driver
sends (at most 97.5), so they never match and the benchmarks' alert accounting (every
``a-`` event alerts, no ``n-`` event does) holds at every size.

    .venv/bin/python -m bench._rule_sets 10000 > rules-10000.yml
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "appliance" / "examples" / "rules.yml"
METRICS = 200
SEED = 45


def _metric(i: int) -> str:
    return "cpu.util" if i == 0 else f"svc{i % 40}.metric{i}"


def rules_doc(n: int, seed: int = SEED) -> dict:
    """``n`` rules (``n >= 1``): the example's cpu-critical rule first."""
    if n < 1:
        raise ValueError(f"at least one rule (got {n})")
    example = yaml.safe_load(EXAMPLE.read_text())["rules"]
    rules = [next(r for r in example if r["id"] == "cpu-critical")]
    rng = random.Random(seed)
    for i in range(1, n):
        metric = _metric(rng.randrange(METRICS))
        threshold = rng.randrange(98, 1000)
        when = f"metric = '{metric}' AND value >= {threshold}"
        if i % 3 == 0:
            when += f" AND source LIKE 'host-{rng.randrange(500)}%'"
        rules.append({"id": f"gen-{i}", "severity": ("info", "warning", "critical")[i % 3],
                      "when": when, "message": f"{metric} at or above {threshold}"})
    return {"rules": rules}


class _IndentedLists(yaml.SafeDumper):
    """Lists indented under their key, as the shipped example writes them: a rule appended
    as text (``appliance_latency.RELOAD_RULE``, the live swap) joins the same list."""

    def increase_indent(self, flow: bool = False, indentless: bool = False):
        return super().increase_indent(flow, False)


def dump(doc: dict) -> str:
    return yaml.dump(doc, Dumper=_IndentedLists, sort_keys=False)


def rules_file(n: int, path: Path, seed: int = SEED) -> Path:
    path.write_text(dump(rules_doc(n, seed)))
    return path


if __name__ == "__main__":
    sys.stdout.write(dump(rules_doc(int(sys.argv[1]))))
