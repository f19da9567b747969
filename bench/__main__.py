"""Run every benchmark module in this package (or the ones named on the command line).

``make bench`` calls this; each module runs with its defaults (its own options:
``python -m bench.<name> --help``). Speed is measured here, never asserted in tests: each module
writes its medians to ``reports/bench/<name>.json`` for the closing notes to quote.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import time

import bench


def discover() -> list[str]:
    modules = pkgutil.iter_modules(bench.__path__)
    return sorted(m.name for m in modules if not m.name.startswith("_"))


def main(argv: list[str] | None = None) -> int:
    known = discover()
    names = (argv if argv is not None else sys.argv[1:]) or known
    unknown = [name for name in names if name not in known]
    if unknown:  # before any benchmark runs: a typo or an option must not cost a long run
        print(f"bench: no benchmark {unknown[0]!r} (benchmarks: {', '.join(known)}; a "
              f"benchmark's options go to python -m bench.<name>)", file=sys.stderr)
        return 2
    failures = 0
    for name in names:
        module = importlib.import_module(f"bench.{name}")
        started = time.monotonic()
        print(f"bench: {name} ...", file=sys.stderr, flush=True)
        rc = module.main([])
        print(f"bench: {name} rc={rc} in {time.monotonic() - started:.0f}s", file=sys.stderr)
        failures += rc != 0
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
