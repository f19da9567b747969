"""Benchmark: does a login flood slow down a client that has already logged in?

A bystander logs in once (SCRAM-SHA-512) and produces one 100-byte record every
``--interval-ms`` with acks=all, timing each round trip: first alone, then while another
process floods the broker with logins (``bench._login_flood``: ``--concurrency``
connections at once from another loopback address, each logging in and closing, over
and over): SCRAM-SHA-512 (no PBKDF2 on the broker; connection churn and the exchange) and
PLAIN (one PBKDF2 check per login, in the broker's password workers). The target: under a
flood the bystander's produce p99 stays within 2x of its p99 alone.

The flooding process runs on the same host and competes for its CPUs: on two cores its
own CPU use raises every process's wake-up latency, whatever the broker does, so the
ratio is an upper bound of what a flood from another host costs. (Pinning the flood to a
CPU of its own was tried and dropped: in a VM the cross-CPU wake-ups it forces made the
flood several times weaker, which flatters the broker.) So each round also has a
``cpu-hog`` phase, the control: a process that only spins, one core's worth, as the
flooding process (one Python process) can use at most, and never touches the broker. The
flood's ratio to it is the broker's own share; the ratio to the bystander alone is the
target's. Phases alternate ``--repeats`` times; medians. Writes
``reports/bench/login_flood.json``.

The broker runs as the Ansible deploy runs it: with a per-IP connection creation rate
(``--creation-rate``, 100 a second), so the flood's connections over it are held off
before any TLS or SASL work; ``--creation-rate 0`` measures the broker without it.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kafka.record.default_records import DefaultRecordBatchBuilder

from appliance.broker import EmbeddedBroker
from appliance.broker.security.credentials import add_user
from appliance.broker.wire import errors, schemas
from appliance.broker.wire.client import WireClient
from bench import _machine as machine
from bench._login_flood import PASSWORD_ENV, login

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "reports" / "bench" / "login_flood.json"
USER = "bench"
TOPIC = "bystander"
FLOODS = ("SCRAM-SHA-512", "PLAIN")
CPU_HOG = "cpu-hog"
# kafka_broker_max_connection_creation_rate_per_ip in ansible/roles/kafka_broker/defaults
DEPLOYED_CREATION_RATE = 100.0
_SPIN = ("import sys, time\nend = time.monotonic() + float(sys.argv[1])\n"
         "while time.monotonic() < end:\n    pass\n")


def _record(value: bytes) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                  producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                  batch_size=1 << 20)
    b.append(0, timestamp=int(time.time() * 1000), key=None, value=value, headers=[])
    return bytes(b.build())


def bystander(bootstrap: str, password: str, seconds: float, interval_s: float) -> list[float]:
    """Round trips (ms) of acks=all produces, one every ``interval_s``, for ``seconds``."""
    out: list[float] = []
    with WireClient(bootstrap, timeout=30, source_ip="127.0.0.1") as c:
        login(c, "SCRAM-SHA-512", USER, password)
        body = {"transactional_id": None, "acks": -1, "timeout_ms": 30000,
                "topic_data": [{"name": TOPIC, "partition_data": [
                    {"index": 0, "records": _record(b"x" * 100)}]}]}
        next_at = time.perf_counter()
        end = next_at + seconds
        while next_at < end:
            now = time.perf_counter()
            if now < next_at:
                time.sleep(next_at - now)
            started = time.perf_counter()
            resp = c.request(schemas.PRODUCE, 8, body)
            out.append((time.perf_counter() - started) * 1000)
            code = resp["responses"][0]["partition_responses"][0]["error_code"]
            if code != errors.NONE:
                raise RuntimeError(f"bystander produce failed: error {code}")
            next_at += interval_s
    return out


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)


def _niced(increment: int):
    """For Popen: the flooding (and control) process at a lower CPU priority."""
    return (lambda: os.nice(increment)) if increment else None


def _phase(broker: EmbeddedBroker, password: str, flood: str | None, args) -> dict:
    busy_before = machine.wait_for_quiet(args.quiet_wait) if args.quiet_wait > 0 else None
    start, cpu0 = machine.cpu_times(), machine.process_cpu_s(broker.proc.pid)
    proc = hog = None
    if flood == CPU_HOG:
        hog = subprocess.Popen([sys.executable, "-c", _SPIN, str(args.seconds + args.ramp)],
                               preexec_fn=_niced(args.flood_nice))
        time.sleep(args.ramp)
    elif flood is not None:
        proc = subprocess.Popen(
            [sys.executable, "-m", "bench._login_flood", broker.bootstrap, "--mechanism",
             flood, "--user", USER, "--concurrency", str(args.concurrency),
             "--seconds", str(args.seconds + args.ramp)],
            stdout=subprocess.PIPE, text=True, preexec_fn=_niced(args.flood_nice),
            env={**os.environ, PASSWORD_ENV: password, "PYTHONPATH": str(ROOT)})
        time.sleep(args.ramp)
    t0 = time.monotonic()
    latencies = bystander(broker.bootstrap, password, args.seconds, args.interval_ms / 1000)
    elapsed = time.monotonic() - t0
    out = {"flood": flood or "none", "produces": len(latencies),
           "p50_ms": _quantile(latencies, 0.5), "p99_ms": _quantile(latencies, 0.99),
           "p999_ms": _quantile(latencies, 0.999), "max_ms": round(max(latencies), 3),
           "broker_cpu_cores": round((machine.process_cpu_s(broker.proc.pid) - cpu0)
                                     / elapsed, 2),
           "cpu_busy_before": busy_before, "cpu_busy_during": machine.busy_since(start)}
    if hog is not None:
        hog.wait(timeout=args.ramp + 60)
    if proc is not None:
        stdout, _ = proc.communicate(timeout=args.seconds + args.ramp + 120)
        if proc.returncode != 0:
            raise RuntimeError(f"login flood failed (exit {proc.returncode})")
        counts = json.loads(stdout.strip().splitlines()[-1])
        out["flood_counts"] = counts
        out["flood_logins_per_s"] = round(counts["logins"] / max(counts["seconds"], 0.01))
    print(f"flood {out['flood']}: p50 {out['p50_ms']} ms, p99 {out['p99_ms']} ms"
          + (f", {out['flood_logins_per_s']} logins/s, "
             f"{counts['refused']} connections held off" if proc is not None else ""),
          file=sys.stderr)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bench.login_flood", description=__doc__)
    ap.add_argument("--seconds", type=float, default=10.0, help="bystander seconds per phase")
    ap.add_argument("--ramp", type=float, default=1.0,
                    help="seconds the flood runs before the bystander starts timing")
    ap.add_argument("--interval-ms", type=float, default=5.0)
    ap.add_argument("--concurrency", type=int, default=200, help="flood connections at once")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quiet-wait", type=float, default=30.0,
                    help="before each phase, wait up to this many seconds for the CPUs to "
                         "be < 30%% busy (other suites share them); 0 = don't wait")
    ap.add_argument("--creation-rate", type=float, default=DEPLOYED_CREATION_RATE,
                    help="the broker's --max-connection-creation-rate-per-ip (default "
                         f"{DEPLOYED_CREATION_RATE:g}, as the Ansible deploy sets it; 0: no "
                         "limit, the broker's own default)")
    ap.add_argument("--flood-nice", type=int, default=0,
                    help="run the flooding and cpu-hog processes at this niceness: 19 "
                         "leaves the CPUs to the broker and the bystander first, as a flood "
                         "from another host would; the broker's work per login and per held "
                         "connection is the same (the flood still reaches the rate)")
    ap.add_argument("--broker-arg", action="append", default=[],
                    help="extra `appliance broker` flag (repeatable), e.g. "
                         "--broker-arg=--max-connections-per-ip=50")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    password = secrets.token_urlsafe(18)
    result: dict = {"bystander": f"1 acks=all produce every {args.interval_ms:g} ms, "
                                 f"SCRAM-SHA-512 login, its own loopback address",
                    "flood_concurrency": args.concurrency,
                    "seconds_per_phase": args.seconds,
                    "max_connection_creation_rate_per_ip": args.creation_rate,
                    "flood_nice": args.flood_nice,
                    "repeats": args.repeats, "broker_args": args.broker_arg,
                    "cpu_count": os.cpu_count(), "load_avg_at_start": os.getloadavg()[0],
                    "runs": []}
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="login-flood-") as tmp:
        users = Path(tmp) / "users.toml"
        add_user(users, USER, password)
        broker = EmbeddedBroker(log_path=Path(tmp) / "broker.log", extra_args=[
            "--security-protocol", "SASL_PLAINTEXT", "--sasl-users", str(users),
            "--sasl-mechanisms", "PLAIN,SCRAM-SHA-512", "--topics", f"{TOPIC}:1",
            f"--max-connection-creation-rate-per-ip={args.creation_rate:g}", *args.broker_arg])
        with broker:
            bystander(broker.bootstrap, password, 1.0, args.interval_ms / 1000)  # warm-up
            for _ in range(args.repeats):
                for flood in (None, CPU_HOG, *FLOODS):
                    result["runs"].append(_phase(broker, password, flood, args))
    summary = {}
    for label in ("none", CPU_HOG, *FLOODS):
        runs = [r for r in result["runs"] if r["flood"] == label]
        summary[label] = {k: statistics.median(r[k] for r in runs)
                          for k in ("p50_ms", "p99_ms", "p999_ms")}
        if label != "none":
            summary[label]["p99_ratio_to_alone"] = round(
                summary[label]["p99_ms"] / summary["none"]["p99_ms"], 2)
        if label in FLOODS:
            summary[label]["p99_ratio_to_cpu_hog"] = round(
                summary[label]["p99_ms"] / summary[CPU_HOG]["p99_ms"], 2)
    result["median"] = summary
    machine.write_result(args.out, result, started)
    print(json.dumps(summary), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
