"""CPU lists in the kernel's notation (``"0-2,5"``), as ``taskset -c``, systemd's
``CPUAffinity=`` and ``/proc/<pid>/status``'s ``Cpus_allowed_list`` spell them: one
spelling for the configuration, the logs and the errors."""

from __future__ import annotations

import re
from collections.abc import Iterable

_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")
MAX_CPU = 4095  # the kernel's usual NR_CPUS bound: a typo is an error, not a huge range


def parse_cpu_list(text: str) -> frozenset[int]:
    """The kernel's CPU list notation, as ``taskset -c`` and systemd's ``CPUAffinity=``
    take it: ``"0"``, ``"0-2,5"`` (spaces allowed); ``""`` is the empty set."""
    cpus: set[int] = set()
    for part in (p.strip() for p in text.replace(" ", ",").split(",")):
        if not part:
            continue
        match = _RANGE.match(part)
        if not match:
            raise ValueError(f"must be CPU numbers and ranges such as '0' or '0-2,5' "
                             f"(got {text!r})")
        low = int(match.group(1))
        high = int(match.group(2)) if match.group(2) is not None else low
        if high < low or high > MAX_CPU:
            raise ValueError(f"bad CPU range {part!r} in {text!r}")
        cpus.update(range(low, high + 1))
    return frozenset(cpus)


def cpu_list(cpus: Iterable[int]) -> str:
    """``{0, 1, 2, 5}`` -> ``"0-2,5"`` (the notation ``parse_cpu_list`` reads)."""
    out: list[str] = []
    run: list[int] = []
    for cpu in sorted(cpus):
        if run and cpu != run[-1] + 1:
            out.append(_span(run))
            run = []
        run.append(cpu)
    if run:
        out.append(_span(run))
    return ",".join(out)


def _span(run: list[int]) -> str:
    return str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}"
