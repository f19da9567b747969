"""Benchmark: the broker over a long steady run, and what its protections cost.

1. Steady (``--seconds``): a durable broker (``--data-dir``, a log budget small enough for
   retention to delete segments during the run) takes ``--rate`` records/s from one
   producer while one consumer long-polls them. Each ``--window`` records the broker's
   RSS, peak RSS and open files, and the window's produce p99 (acks=1, request to answer,
   client side) and hop p99 (produce to consume, by the timestamp in each record). The
   verdict: the last quarter against the first, and the peak RSS against the stated
   memory bound (``appliance.broker.memory_bound``).
2. Cost (``--cost-seconds``, ``--repeats``): the Java client (the Spark connector's) on a
   fresh in-memory broker per run, four variants in rotating order within each repeat:
   as shipped (CRC-32C checked, one request in flight per connection), without the CRC
   check, without the one-in-flight rule, without either (the broker before issue 46).
   Each gives the hop p99 at ``--cost-rate`` records/s and the highest produce rate.

Medians over repeats; other work on the same cores makes single runs noisy, so each Java
run first waits (bounded) for the CPUs to quiet down. Writes
``reports/bench/broker_soak.json``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

from kafka.record import MemoryRecords
from kafka.record.default_records import DefaultRecordBatchBuilder

from appliance.broker import EmbeddedBroker
from appliance.broker.memory_bound import Load, bound
from appliance.broker.settings import BrokerConfig
from appliance.broker.wire import schemas
from appliance.broker.wire.client import WireClient
from bench._broker_load import process_memory
from bench._java import compile_driver
from bench._machine import write_result
from bench.broker_latency import run_driver

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "reports" / "bench" / "broker_soak.json"
MIB = 1 << 20
VARIANTS = {
    "shipped (CRC checked, one in flight)": [],
    "no CRC check": ["--unsafe-skip-produce-crc"],
    "pipelined (no one-in-flight rule)": ["--max-in-flight-requests", "0"],
    "neither (the broker before)": ["--unsafe-skip-produce-crc",
                                    "--max-in-flight-requests", "0"],
}


@dataclass
class Window:
    at_s: float
    rss_mib: float
    peak_mib: float
    open_files: int
    produced: int
    consumed: int
    produce_p99_ms: float | None
    hop_p99_ms: float | None


def _p99(values: list[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[int(0.99 * (len(ordered) - 1))], 3)


class SteadyLoad:
    """One producer at a fixed rate (batches of ``batch`` records, each record's value
    starting with its send time), one consumer long-polling; latencies per window."""

    def __init__(self, bootstrap: str, topic: str, rate: float, batch: int,
                 value_bytes: int) -> None:
        self.bootstrap, self.topic = bootstrap, topic
        self.rate, self.batch, self.value_bytes = rate, batch, value_bytes
        self.produce_ms: list[float] = []
        self.hop_ms: list[float] = []
        self.produced = self.consumed = 0
        self.failure: BaseException | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._guard, args=(f,), daemon=True)
                         for f in (self._produce, self._consume)]

    def _guard(self, work) -> None:
        try:
            work()
        except BaseException as exc:  # reported by the caller
            self.failure = exc
            self._stop.set()

    def _produce(self) -> None:
        pad = b"p" * max(self.value_bytes - 20, 0)
        interval = self.batch / self.rate
        with WireClient(self.bootstrap, timeout=30) as c:
            next_at = time.perf_counter()
            while not self._stop.is_set():
                b = DefaultRecordBatchBuilder(magic=2, compression_type=0,
                                              is_transactional=False, producer_id=-1,
                                              producer_epoch=-1, base_sequence=-1,
                                              batch_size=1 << 30)
                now_ns = time.time_ns()
                for i in range(self.batch):
                    b.append(i, timestamp=now_ns // 1_000_000, key=None,
                             value=b"%019d" % now_ns + pad, headers=[])
                started = time.perf_counter()
                resp = c.request(schemas.PRODUCE, 8, {
                    "transactional_id": None, "acks": 1, "timeout_ms": 10000,
                    "topic_data": [{"name": self.topic, "partition_data": [
                        {"index": 0, "records": bytes(b.build())}]}]})
                took = (time.perf_counter() - started) * 1000
                part = resp["responses"][0]["partition_responses"][0]
                if part["error_code"]:
                    raise RuntimeError(f"produce failed: {part}")
                with self._lock:
                    self.produce_ms.append(took)
                    self.produced += self.batch
                next_at += interval
                time.sleep(max(next_at - time.perf_counter(), 0))

    def _consume(self) -> None:
        offset = 0
        with WireClient(self.bootstrap, timeout=30) as c:
            while not self._stop.is_set():
                resp = c.request(schemas.FETCH, 11, {
                    "replica_id": -1, "max_wait_ms": 500, "min_bytes": 1,
                    "max_bytes": 8 << 20, "isolation_level": 0, "session_id": 0,
                    "session_epoch": -1, "topics": [{"topic": self.topic, "partitions": [{
                        "partition": 0, "current_leader_epoch": -1, "fetch_offset": offset,
                        "log_start_offset": -1, "partition_max_bytes": 8 << 20}]}],
                    "forgotten_topics_data": [], "rack_id": ""})
                part = resp["responses"][0]["partitions"][0]
                now_ns = time.time_ns()
                if part["error_code"] == 1:  # retention passed us: start at the log start
                    offset = part["log_start_offset"]
                    continue
                batches = MemoryRecords(bytes(part["records"]))
                hops = []
                while (b := batches.next_batch()) is not None:
                    for r in b:
                        if r.offset >= offset:
                            hops.append((now_ns - int(r.value[:19])) / 1e6)
                            offset = r.offset + 1
                with self._lock:
                    self.hop_ms.extend(hops)
                    self.consumed += len(hops)

    def start(self) -> SteadyLoad:
        for t in self._threads:
            t.start()
        return self

    def window(self) -> tuple[list[float], list[float], int, int]:
        """This window's latencies (and totals so far); the next window starts now."""
        with self._lock:
            out = (self.produce_ms, self.hop_ms, self.produced, self.consumed)
            self.produce_ms, self.hop_ms = [], []
        return out

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=30)


def _quarters(values: list[float]) -> tuple[float, float]:
    n = max(len(values) // 4, 1)
    return statistics.median(values[:n]), statistics.median(values[-n:])


def steady(args: argparse.Namespace) -> dict:
    windows: list[Window] = []
    with tempfile.TemporaryDirectory() as tmp, EmbeddedBroker(
            data_dir=Path(tmp) / "data", log_path=Path(tmp) / "broker.log",
            topics={"steady": 1},
            extra_args=["--retention-total-bytes", str(args.retention_total_bytes),
                        "--retention-total-policy", "keep-newest",  # no group commits
                        "--segment-bytes", str(args.segment_bytes)]) as broker:
        load = SteadyLoad(broker.bootstrap, "steady", args.rate, args.batch,
                          args.value_bytes).start()
        started = time.monotonic()
        try:
            while time.monotonic() - started < args.seconds and load.failure is None:
                time.sleep(min(args.window, args.seconds))
                produce_ms, hop_ms, produced, consumed = load.window()
                mem = process_memory(broker.proc.pid)
                windows.append(Window(round(time.monotonic() - started, 1),
                                      round(mem.rss / MIB, 1), round(mem.peak / MIB, 1),
                                      mem.open_files, produced, consumed, _p99(produce_ms),
                                      _p99(hop_ms)))
                print(f"steady {windows[-1]}", file=sys.stderr)
        finally:
            load.stop()
        if load.failure is not None:
            raise RuntimeError(f"steady load failed: {load.failure!r}")
    limit = bound(BrokerConfig(data_dir="x", retention_total_bytes=args.retention_total_bytes),
                  Load(connections=2, partitions=1,
                       segments=args.retention_total_bytes // args.segment_bytes + 2,
                       request_bytes=args.batch * (args.value_bytes + 20) + 4096))
    out: dict = {"rate": args.rate, "batch": args.batch, "value_bytes": args.value_bytes,
                 "seconds": args.seconds, "window_s": args.window,
                 "retention_total_bytes": args.retention_total_bytes,
                 "segment_bytes": args.segment_bytes,
                 "bound_mib": round(limit.total / MIB, 1), "bound_terms": limit.describe(),
                 "windows": [asdict(w) for w in windows]}
    if len(windows) >= 4:
        warm = windows[max(len(windows) // 5, 1):]
        for name in ("rss_mib", "open_files", "produce_p99_ms", "hop_p99_ms"):
            values = [v for w in warm if (v := getattr(w, name)) is not None]
            if values:
                first, last = _quarters(values)
                out[f"{name}_first_quarter"], out[f"{name}_last_quarter"] = first, last
        out["peak_mib"] = max(w.peak_mib for w in windows)
        out["within_bound"] = out["peak_mib"] < out["bound_mib"]
    return out


def cost(args: argparse.Namespace) -> dict:
    cp = compile_driver("BrokerLatencyBench.java")
    names = list(VARIANTS)
    runs: dict[str, list[dict]] = {name: [] for name in names}
    for repeat in range(args.repeats):
        order = names[repeat % len(names):] + names[:repeat % len(names)]
        for name in order:
            with tempfile.TemporaryDirectory() as tmp, EmbeddedBroker(
                    log_path=Path(tmp) / "broker.log", extra_args=VARIANTS[name]) as broker:
                topic = f"cost-{uuid.uuid4().hex[:6]}"
                broker.create_topics({topic: 1})
                lat = run_driver(cp, "latency", broker.bootstrap, topic, str(args.cost_rate),
                                 str(args.cost_seconds), "2", "100",
                                 timeout=args.cost_seconds + 120,
                                 broker_pid=broker.proc.pid, quiet_wait_s=args.quiet_wait)
                topic = f"cost-tput-{uuid.uuid4().hex[:6]}"
                broker.create_topics({topic: 1})
                tput = run_driver(cp, "throughput", broker.bootstrap, topic,
                                  str(args.cost_seconds), str(args.value_bytes),
                                  timeout=args.cost_seconds + 200, broker_pid=broker.proc.pid,
                                  quiet_wait_s=args.quiet_wait)
            runs[name].append({"hop_p99_ms": lat["p99_ms"], "hop_p50_ms": lat["p50_ms"],
                               "produce_rps": tput["produce_rps"],
                               "cpu_busy_before": lat["cpu_busy_before"]})
            print(f"cost {name} repeat {repeat}: {runs[name][-1]}", file=sys.stderr)
    return {"rate": args.cost_rate, "seconds": args.cost_seconds, "repeats": args.repeats,
            "client": "java kafka-clients 3.9.1 (acks=all, idempotent, linger.ms=0)",
            "variants": {name: {
                "median_hop_p99_ms": statistics.median(r["hop_p99_ms"] for r in rs),
                "median_produce_rps": statistics.median(r["produce_rps"] for r in rs),
                "runs": rs} for name, rs in runs.items()}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bench.broker_soak", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=600.0, help="steady part (0: skip)")
    ap.add_argument("--window", type=float, default=30.0)
    ap.add_argument("--rate", type=float, default=2000.0, help="steady records/s")
    ap.add_argument("--batch", type=int, default=10, help="records per produce request")
    ap.add_argument("--value-bytes", type=int, default=300)
    ap.add_argument("--retention-total-bytes", type=int, default=128 * MIB)
    ap.add_argument("--segment-bytes", type=int, default=16 * MIB)
    ap.add_argument("--cost-seconds", type=float, default=15.0, help="cost part per run "
                    "(0: skip)")
    ap.add_argument("--cost-rate", type=int, default=10000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quiet-wait", type=float, default=30.0,
                    help="before each Java run, wait up to this long for the CPUs to be "
                         "< 30%% busy; 0: don't wait")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    if args.seconds and args.window <= 0:
        print("bench.broker_soak: --window: must be > 0", file=sys.stderr)
        return 2
    result: dict = {"cpu_count": os.cpu_count(), "load_avg_at_start": os.getloadavg()[0]}
    started = time.monotonic()
    if args.seconds > 0:
        result["steady"] = steady(args)
    if args.cost_seconds > 0:
        result["cost"] = cost(args)
    write_result(args.out, result, started)
    return 0


if __name__ == "__main__":
    sys.exit(main())
