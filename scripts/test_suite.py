"""Run the test suite in its parts and say, at the end, what each part cost.

`make test` (and so CI) runs the parts in order: the parallel part on two pytest workers,
the `exclusive` tests alone (they bound a latency: against the same run's steady state, or
a bystander client's while a hostile one works), then the Ansible deploy onto the test bed.
Every part runs even when one before it failed, so one run shows every failure; the exit
status is the first failing part's.

At the end it prints each part's wall time, the 30 slowest tests of the whole run (from
each part's JUnit XML, so one table across the parts) and a closing count line. The
suite's budget is 30 minutes on the project's 2-core machines: the table is where to look
when it grows.

    python scripts/test_suite.py [PART ...]      # parts: parallel exclusive deploy
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "build" / "test-results"
SLOWEST = 30


@dataclass(frozen=True)
class Part:
    name: str
    why: str
    args: tuple[str, ...]


def parts(workers: str) -> tuple[Part, ...]:
    """The suite's parts, in the order they run. ``workers``: PYTEST_WORKERS (0 = serial)."""
    return (
        # Whole files per worker, so a file's module fixtures are built once: most of the
        # time is tests waiting on JVM starts, open-loop load and timeouts, which overlap
        # well on 2 cores.
        Part("parallel", "everything but the exclusive and deploy tests, on two workers",
             ("-m", "not deploy and not exclusive", "-n", workers, "--dist", "loadfile")),
        Part("exclusive", "latency bounds, alone on the machine",
             ("-m", "exclusive and not deploy", "-n", "0")),
        Part("deploy", "the Ansible deploy onto the multi-host test bed (root)",
             ("-m", "deploy", "tests/deploy", "-s")),
    )


@dataclass(frozen=True)
class Outcome:
    part: Part
    rc: int
    seconds: float
    counts: dict[str, int]
    durations: list[tuple[float, str]]


def _read_junit(path: Path) -> tuple[dict[str, int], list[tuple[float, str]]]:
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    durations: list[tuple[float, str]] = []
    if not path.exists():
        return counts, durations
    for case in ET.parse(path).getroot().iter("testcase"):
        name = f"{case.get('classname', '')}::{case.get('name', '')}"
        durations.append((float(case.get("time") or 0.0), name))
        tags = {child.tag for child in case}
        if tags & {"failure", "error"}:
            counts["failed"] += 1
        elif "skipped" in tags:
            counts["skipped"] += 1
        else:
            counts["passed"] += 1
    return counts, durations


def run_part(part: Part, python: str) -> Outcome:
    RESULTS.mkdir(parents=True, exist_ok=True)
    junit = RESULTS / f"{part.name}.xml"
    junit.unlink(missing_ok=True)
    print(f"\n=== test part {part.name}: {part.why}", flush=True)
    started = time.monotonic()
    rc = subprocess.run([python, "-m", "pytest", *part.args, f"--junitxml={junit}"],
                        cwd=REPO, check=False).returncode
    seconds = time.monotonic() - started
    counts, durations = _read_junit(junit)
    if rc == 5:  # pytest: no test selected in this part (e.g. none marked exclusive)
        rc = 0
    return Outcome(part, rc, seconds, counts, durations)


def _minutes(seconds: float) -> str:
    return f"{int(seconds // 60)}:{int(seconds % 60):02d}"


def summary(outcomes: list[Outcome]) -> str:
    lines = ["", "=== the suite's parts (budget 30:00 in all on 2 cores)"]
    for o in outcomes:
        c = o.counts
        lines.append(f"{o.part.name:10} {_minutes(o.seconds):>6}  rc={o.rc}  "
                     f"{c['passed']} passed, {c['failed']} failed, {c['skipped']} skipped")
    total = sum(o.seconds for o in outcomes)
    lines.append(f"{'total':10} {_minutes(total):>6}")
    slowest = sorted((d for o in outcomes for d in o.durations), reverse=True)[:SLOWEST]
    lines.append(f"=== the {len(slowest)} slowest tests of the run (seconds, set-up included)")
    lines += [f"{seconds:8.1f}  {name}" for seconds, name in slowest]
    passed = sum(o.counts["passed"] for o in outcomes)
    failed = sum(o.counts["failed"] for o in outcomes)
    skipped = sum(o.counts["skipped"] for o in outcomes)
    lines.append(f"suite: {passed} passed, {failed} failed, {skipped} skipped")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    workers = os.environ.get("PYTEST_WORKERS", "2")
    table = parts(workers)
    names = [p.name for p in table]
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("parts", nargs="*", choices=names, metavar="PART",
                        help=f"the parts to run, of {', '.join(names)} "
                        "(default: all, in that order)")
    args = parser.parse_args(argv)
    chosen = [p for p in table if not args.parts or p.name in args.parts]
    outcomes = [run_part(p, sys.executable) for p in chosen]
    print(summary(outcomes), flush=True)
    failing = [o.rc for o in outcomes if o.rc != 0]
    return failing[0] if failing else 0


if __name__ == "__main__":
    sys.exit(main())
