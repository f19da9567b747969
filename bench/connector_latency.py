"""Benchmark: produce -> Spark (appliance-kafka source, stateless select, appliance-kafka
sink) -> consume latency for each trigger, and the highest sustained micro-batch rate.

One Python process stamps each record's value with its send time and times its arrival on
the output topic with the same clock (confluent-kafka producer and consumer threads), so
the figure includes both Kafka hops and the Spark query. Each (trigger, rate) is measured
in ``--runs`` short windows on one running query; the report gives the median of the
windows' medians. Other work on the same cores makes single runs noisy.
Writes ``reports/bench/connector_latency.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import threading
import time
import uuid
from pathlib import Path

from appliance.trigger import TRIGGERS, trigger_mode
from bench._cells import short_run_interval
from bench._machine import write_result

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "reports" / "bench" / "connector_latency.json"
PARTITIONS = 2



class Arrivals(threading.Thread):
    """Consumes the output topic and records (sent_ns, received_ns) per record."""

    def __init__(self, bootstrap: str, topic: str):
        super().__init__(daemon=True)
        import confluent_kafka as ck

        self.consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-unused",
                                     "enable.auto.commit": False, "fetch.wait.max.ms": 10,
                                     "fetch.min.bytes": 1})
        self.consumer.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING)
                              for p in range(PARTITIONS)])
        self.samples: list[tuple[int, int]] = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.is_set():
            for msg in self.consumer.consume(num_messages=10_000, timeout=0.05):
                if msg.error() is None:
                    now = time.time_ns()
                    with self.lock:
                        self.samples.append((int(msg.value()), now))
        self.consumer.close()

    def window(self, start_ns: int, end_ns: int) -> list[float]:
        """Latencies (ms) of records sent in [start_ns, end_ns)."""
        with self.lock:
            return [(r - s) / 1e6 for s, r in self.samples if start_ns <= s < end_ns]


def produce_at(bootstrap: str, topic: str, rate: int, seconds: float) -> tuple[int, int, int]:
    """Paced open-loop producer; returns (first_ns, end_ns, records sent)."""
    import confluent_kafka as ck

    p = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 1, "acks": 1,
                     "queue.buffering.max.messages": 1_000_000})
    start = time.monotonic()
    first_ns = time.time_ns()
    sent = 0
    while True:
        elapsed = time.monotonic() - start
        if elapsed >= seconds:
            break
        due = int(rate * elapsed)
        while sent < due:
            p.produce(topic, value=str(time.time_ns()).encode(), partition=sent % PARTITIONS)
            sent += 1
        p.poll(0)
        time.sleep(0.001)
    end_ns = time.time_ns()
    p.flush(30)
    return first_ns, end_ns, sent


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def start_query(spark, bootstrap: str, src: str, dst: str, trigger: str):
    df = (spark.readStream.format("appliance-kafka")
          .option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", src).option("startingOffsets", "latest").load())
    w = (df.select("key", "value").writeStream.format("appliance-kafka")
         .option("kafka.bootstrap.servers", bootstrap).option("topic", dst)
         .option("checkpointLocation", tempfile.mkdtemp(prefix="bench-ckpt-")))
    mode = trigger_mode(trigger)
    q = (w.trigger(**mode.trigger_kwargs(short_run_interval(trigger)))
         .outputMode(mode.output_mode).start())
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and q.isActive and not q.recentProgress:
        if not mode.reports_idle_progress:
            time.sleep(5)  # no progress before data (or ever): give the tasks time to start
            break
        time.sleep(0.2)
    return q


def measure(spark, broker, trigger: str, rate: int, runs: int, seconds: float) -> dict:
    src, dst = f"bench-in-{uuid.uuid4().hex[:8]}", f"bench-out-{uuid.uuid4().hex[:8]}"
    broker.create_topics({src: PARTITIONS, dst: PARTITIONS})
    arrivals = Arrivals(broker.bootstrap, dst)
    arrivals.start()
    q = start_query(spark, broker.bootstrap, src, dst, trigger)
    try:
        produce_at(broker.bootstrap, src, rate, 2.0)  # warm-up: JIT, consumers, producers
        results = []
        for _ in range(runs):
            first, end, sent = produce_at(broker.bootstrap, src, rate, seconds)
            deadline = time.monotonic() + 30
            lat = arrivals.window(first, end)
            while len(lat) < sent and time.monotonic() < deadline:
                time.sleep(0.2)
                lat = arrivals.window(first, end)
            results.append({"sent": sent, "received": len(lat),
                            "p50_ms": round(percentile(lat, 0.5), 2) if lat else None,
                            "p99_ms": round(percentile(lat, 0.99), 2) if lat else None})
    finally:
        q.stop()
        arrivals.stopping.set()
        arrivals.join(10)
    ok = [r for r in results if r["p50_ms"] is not None]
    return {
        "p50_ms_median": statistics.median(r["p50_ms"] for r in ok) if ok else None,
        "p99_ms_median": statistics.median(r["p99_ms"] for r in ok) if ok else None,
        "all_delivered": all(r["received"] >= r["sent"] for r in results),
        "runs": results,
    }


def max_sustained_microbatch(spark, broker, rates: list[int], seconds: float) -> dict:
    """Highest rate whose records all arrive within 5 s of the window's end and whose p99
    stays under 5 s (a backlog that grows shows up as both)."""
    tried = []
    best = None
    for rate in rates:
        r = measure(spark, broker, "microbatch", rate, runs=1, seconds=seconds)
        run = r["runs"][0]
        achieved = run["sent"] / seconds
        sustained = (r["all_delivered"] and r["p99_ms_median"] is not None
                     and r["p99_ms_median"] < 5000 and achieved >= 0.9 * rate)
        tried.append({"rate": rate, "achieved_produce_rate": round(achieved),
                      "sustained": sustained, **run})
        if not sustained:
            break
        best = rate
    return {"max_sustained_rate": best, "steps": tried}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.connector_latency", description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--rates", default="1000,10000")
    parser.add_argument("--triggers", default=",".join(TRIGGERS))
    parser.add_argument("--max-rates", default="20000,40000,80000,120000,160000,240000")
    parser.add_argument("--max-seconds", type=float, default=8.0,
                        help="window per step of the sustained-rate ladder")
    args = parser.parse_args(argv)
    started, load0 = time.monotonic(), os.getloadavg()[0]

    from pyspark.sql import SparkSession

    from appliance.broker import EmbeddedBroker
    from appliance.connector import spark_jars_conf

    builder = (SparkSession.builder.master("local[2]").appName("bench-connector-latency")
               .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2"))
    for key, value in spark_jars_conf().items():
        builder = builder.config(key, value)
    report: dict = {"bench": "connector_latency",
                    "started": time.strftime("%FT%TZ", time.gmtime()),
                    "host": {"cpus": os.cpu_count(), "python": platform.python_version()},
                    "note": "medians of short runs on shared cores; latency = produce -> "
                            "Spark select -> consume, one clock",
                    "latency": {}}
    with EmbeddedBroker() as broker:
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
        try:
            for trigger in [t for t in args.triggers.split(",") if t]:
                report["latency"][trigger] = {}
                for rate in (int(r) for r in args.rates.split(",")):
                    result = measure(spark, broker, trigger, rate, args.runs, args.seconds)
                    report["latency"][trigger][str(rate)] = result
                    print(f"{trigger:>10} {rate:>6}/s p50={result['p50_ms_median']} ms "
                          f"p99={result['p99_ms_median']} ms", flush=True)
            report["microbatch_max"] = max_sustained_microbatch(
                spark, broker, [int(r) for r in args.max_rates.split(",") if r], args.max_seconds)
            print(f"microbatch max sustained: {report['microbatch_max']['max_sustained_rate']}/s")
        finally:
            spark.stop()
    if OUT.exists() and not report["latency"]:
        report["latency"] = json.loads(OUT.read_text()).get("latency", {})  # ladder-only rerun
    write_result(OUT, report, started, load0)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
