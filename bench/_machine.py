"""How busy this machine is: benchmarks share two cores with whatever else runs, so every
run waits (bounded) for quiet and records how busy the CPUs were before and during it."""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from pathlib import Path


def cpu_times() -> tuple[int, int]:
    """(total, idle) jiffies over all CPUs, from /proc/stat."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    return sum(fields), fields[3] + fields[4]  # idle + iowait


def busy_since(start: tuple[int, int]) -> float:
    total, idle = cpu_times()
    return round(1.0 - (idle - start[1]) / max(total - start[0], 1), 2)


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds a process has used so far (from /proc)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_for_quiet(max_wait_s: float, threshold: float = 0.3) -> float:
    """Other suites share these cores: give them a bounded chance to go quiet first."""
    deadline = time.monotonic() + max_wait_s
    while True:
        start = cpu_times()
        time.sleep(1.0)
        busy = busy_since(start)
        if busy <= threshold or time.monotonic() >= deadline:
            return busy


def write_result(out: Path, result: dict, started: float,
                 load_start: float | None = None) -> None:
    """Write a bench's JSON result, the one way every bench does: with the machine it ran
    on and how busy it was (``load_start``: the load average when the bench began, if it
    took one; a bench's own ``machine`` facts are kept) and how long the bench ran
    (``started``: its ``time.monotonic()`` at the start)."""
    machine = {"cpus": os.cpu_count(), "python": platform.python_version()}
    if load_start is not None:
        machine["load_avg_start"] = load_start
    machine["load_avg_end"] = os.getloadavg()[0]
    result["machine"] = {**machine, **result.get("machine", {})}
    result["elapsed_s"] = round(time.monotonic() - started, 1)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}", file=sys.stderr)
