"""Each trigger's maximum sustainable event rate, next to the passthrough floor's.

A latency figure at one rate says nothing about how close that rate is to the edge. This
module finds, per trigger, the highest rate at which the appliance keeps up: every probe
is a cell of ``bench.appliance_latency`` at one rate (a fresh ``appliance run``, the warmed
Java driver sending open-loop from ``appliance.ready`` for ``--seconds``), and a rate is
**sustained** when its lag stays bounded over the whole window:

- the events scheduled in the last ``--tail`` seconds have a per-second p99 of at most
  ``--bound-ms`` (an open-loop backlog grows with every second the rate exceeds what the
  query drains, so an unsustainable rate ends the window seconds behind),
- no alert is lost, and
- the driver itself kept the rate (its sending took at most 5 % longer than scheduled;
  beyond that the probe measured the driver, not the product, and the search stops
  there; single sends a millisecond late are normal on a busy machine and are inside the
  latency, which counts from each event's scheduled time).

The search is bounded: rates double from ``--start`` while they are sustained, up to
``--max``; then ``--steps`` bisections between the highest sustained and the lowest
failed rate. The JVM passthrough (consume -> produce, no Spark) is searched the same way,
each probe on a fresh embedded broker as every other probe is: the floor of what this
machine, broker and driver can carry.

    .venv/bin/python -m bench.appliance_throughput                 # the real thing (long)
    .venv/bin/python -m bench.appliance_throughput --smoke         # proves it runs, ~5 min

Writes ``reports/bench/appliance_throughput.{json,md}``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from bench._cells import BY_NAME
from bench._machine import write_result
from bench.appliance_latency import (
    READY_TIMEOUT_S,
    ROOT,
    run_appliance_cell,
    run_passthrough_cell,
)

OUT = ROOT / "reports" / "bench" / "appliance_throughput.json"
TRIGGERS = ("passthrough", "continuous", "realtime", "microbatch")
SEND_OVERRUN_MAX = 0.05  # the driver's own limit: sending longer than this and the probe is void


@dataclass(frozen=True)
class Limits:
    seconds: float = 60.0
    tail_s: int = 15
    bound_ms: float = 1000.0
    start: int = 10_000
    max_rate: int = 320_000
    steps: int = 3


SMOKE = Limits(seconds=10.0, tail_s=4, bound_ms=1000.0, start=2_000, max_rate=4_000, steps=0)


@dataclass(frozen=True)
class Probe:
    rate: int
    sustained: bool
    driver_limited: bool
    why: str                     # what failed ("" when sustained)
    tail_p99_ms: float | None    # the worst per-second p99 of the last tail seconds
    p99_ms: float | None
    late_share: float | None
    alerts_lost: int | None


def judge(rate: int, result: dict, limits: Limits) -> Probe:
    """Whether one probe's run (the driver's JSON, or ``{"error": ...}``) sustained ``rate``."""
    if "error" in result:
        return Probe(rate, False, False, f"run failed: {result['error'][:200]}", None, None,
                     None, None)
    start = limits.seconds - limits.tail_s
    tail = [s["p99"] for s in result["per_second"] if s["count"] > 0 and s["second"] >= start]
    tail_p99 = max(tail) if tail else None
    late = result["sent_late_over_1ms"] / max(result["sent"], 1)
    overrun = result["send_s"] / limits.seconds - 1
    driver_limited = overrun > SEND_OVERRUN_MAX
    lost = result["alerts_lost"]
    why = []
    if driver_limited:
        why.append(f"driver sent for {result['send_s']:g} s instead of {limits.seconds:g}")
    if tail_p99 is None:
        why.append("no alert in the last seconds")
    elif tail_p99 > limits.bound_ms:
        why.append(f"lag not bounded: p99 {tail_p99:g} ms in the last {limits.tail_s} s")
    if lost:
        why.append(f"{lost} alerts lost")
    return Probe(rate, not why, driver_limited, "; ".join(why), tail_p99,
                 result["latency_ms"]["p99"], round(late, 4), lost)


def search(probe: Callable[[int], Probe], limits: Limits) -> list[Probe]:
    """Doubling from ``limits.start`` while sustained (at most up to ``max_rate``), then
    ``steps`` bisections; stops where the driver limits. Every probe is returned."""
    probes: list[Probe] = []
    good: int | None = None
    bad: int | None = None
    rate = limits.start
    while rate <= limits.max_rate:
        p = probe(rate)
        probes.append(p)
        if p.driver_limited:
            return probes
        if not p.sustained:
            bad = rate
            break
        good = rate
        rate *= 2
    if bad is None:
        return probes
    low = good if good is not None else 0
    for _ in range(limits.steps):
        mid = (low + bad) // 2
        if mid <= low or mid >= bad:
            break
        p = probe(mid)
        probes.append(p)
        if p.driver_limited:
            break
        if p.sustained:
            low = mid
        else:
            bad = mid
    return probes


def summary(trigger: str, probes: list[Probe]) -> dict:
    sustained = [p.rate for p in probes if p.sustained]
    failed = [p.rate for p in probes if not p.sustained and not p.driver_limited]
    return {"trigger": trigger, "max_sustained_rate": max(sustained, default=None),
            "lowest_failed_rate": min(failed, default=None),
            "driver_limited": any(p.driver_limited for p in probes),
            "probes": [asdict(p) for p in probes]}


def markdown(doc: dict) -> str:
    out = [f"# appliance throughput\n\n`{doc['command']}`\n\n{doc['note']}\n",
           "| trigger | max sustained rate/s | lowest failed rate/s | why it failed | probes |",
           "|---|---|---|---|---|"]
    for s in doc["triggers"]:
        fail = next((p for p in s["probes"] if p["rate"] == s["lowest_failed_rate"]
                     or p["driver_limited"]), None)
        rates = ", ".join(f"{p['rate']:,}{'' if p['sustained'] else ' (no)'}"
                          for p in s["probes"])
        best = "-" if s["max_sustained_rate"] is None else f"{s['max_sustained_rate']:,}"
        limited = " (driver-limited)" if s["driver_limited"] else ""
        failed = ("-", "") if fail is None else (f"{fail['rate']:,}", fail["why"])
        out.append(f"| {s['trigger']} | {best}{limited} | {failed[0]} | {failed[1]} | "
                   f"{rates} |")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.appliance_throughput", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--triggers", nargs="+", default=list(TRIGGERS), choices=TRIGGERS)
    parser.add_argument("--smoke", action="store_true",
                        help=f"short probes at low rates ({SMOKE}); proves it runs")
    parser.add_argument("--seconds", type=float, default=None, help="sending seconds per probe")
    parser.add_argument("--tail", type=int, default=None,
                        help="last seconds whose lag must stay bounded")
    parser.add_argument("--bound-ms", type=float, default=None,
                        help="the bound on those seconds' per-second p99")
    parser.add_argument("--start", type=int, default=None, help="first rate (events/s)")
    parser.add_argument("--max", type=int, default=None, help="highest rate probed")
    parser.add_argument("--steps", type=int, default=None, help="bisection probes")
    parser.add_argument("--ready-timeout", type=float, default=READY_TIMEOUT_S)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args([] if argv is None else argv)
    base = SMOKE if args.smoke else Limits()
    limits = replace(base, **{k: v for k, v in {
        "seconds": args.seconds, "tail_s": args.tail, "bound_ms": args.bound_ms,
        "start": args.start, "max_rate": args.max, "steps": args.steps}.items()
        if v is not None})
    if (limits.seconds <= 0 or not 0 < limits.tail_s < limits.seconds or limits.start < 1
            or limits.max_rate < limits.start or limits.steps < 0 or limits.bound_ms <= 0):
        print(f"bench.appliance_throughput: inconsistent limits {limits}", file=sys.stderr)
        return 2

    from appliance.broker import EmbeddedBroker
    from bench._java import compile_driver

    cp = compile_driver("AlertLatencyBench.java")
    started = time.monotonic()
    load0 = os.getloadavg()[0]
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-throughput-") as tmp:
        for trigger in args.triggers:
            cell = BY_NAME[trigger]

            def probe(rate: int, cell=cell) -> Probe:
                print(f"bench: {cell.name} at {rate:,}/s for {limits.seconds:g} s",
                      file=sys.stderr, flush=True)
                workdir = Path(tempfile.mkdtemp(prefix=f"{cell.name}-{rate}-", dir=tmp))
                at_rate = replace(cell, rate=rate)
                # A broker of its own per probe: the embedded broker keeps every record in
                # memory, and one broker for a whole search (tens of millions of events at
                # the top rates) grew past the machine's memory until the kernel killed it
                # mid-probe, failing every later probe.
                with EmbeddedBroker() as broker:
                    broker.create_topics({"appliance.warmup": 2})
                    try:
                        if cell.trigger == "passthrough":
                            result = run_passthrough_cell(at_rate, cp, broker, limits.seconds,
                                                          workdir)
                        else:
                            result = run_appliance_cell(at_rate, cp, broker, limits.seconds,
                                                        workdir, args.ready_timeout)
                    except Exception as exc:  # noqa: BLE001 - a failed probe is a failed rate
                        result = {"error": str(exc)}
                    if broker.proc is not None and broker.proc.poll() is not None:
                        result = {"error": f"the broker exited ({broker.proc.returncode}) "
                                           f"during the probe: {result.get('error', '')}"}
                verdict = judge(rate, result, limits)
                print(f"bench:   {'sustained' if verdict.sustained else 'NOT sustained'}"
                      f"{': ' + verdict.why if verdict.why else ''}", file=sys.stderr,
                      flush=True)
                return verdict

            results.append(summary(trigger, search(probe, limits)))

    given = [f"--{flag} {value:g}" if isinstance(value, float) else f"--{flag} {value}"
             for flag, value in (("seconds", args.seconds), ("tail", args.tail),
                                 ("bound-ms", args.bound_ms), ("start", args.start),
                                 ("max", args.max), ("steps", args.steps))
             if value is not None]
    command = "python -m bench.appliance_throughput " + " ".join(
        ["--smoke"] * args.smoke + [f"--triggers {' '.join(args.triggers)}"] + given)
    doc = {"benchmark": "appliance_throughput", "command": command,
           "note": (f"a probe = a fresh `appliance run` (or the passthrough relay) at one "
                    f"rate for {limits.seconds:g} s from `appliance.ready`; sustained = "
                    f"per-second p99 <= {limits.bound_ms:g} ms over the last "
                    f"{limits.tail_s} s, no alert lost, the driver kept the rate; search: "
                    f"doubling from {limits.start:,}/s up to {limits.max_rate:,}/s, then "
                    f"{limits.steps} bisections"),
           "limits": asdict(limits),
           "triggers": results}
    write_result(args.out, doc, started, load0)
    args.out.with_suffix(".md").write_text(markdown(doc))
    print(markdown(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
