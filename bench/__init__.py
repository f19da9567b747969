"""Benchmarks: each module has ``main(argv=None) -> int`` and writes JSON under reports/bench/."""
