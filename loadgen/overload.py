"""Overload runs: open-loop phases of input rates against a running query, with exact
accounting and time series of rate, lag, latency and memory.

Why a separate tool from ``loadgen run``: an overload run is about what happens over time
when the input outpaces the query (does the backlog stay in Kafka, does memory stay
bounded, does the lag drain afterwards), so it records one sample every half second instead
of one latency report, and it changes the rate in phases (steady, overload, steady again).

The record format is the smallest that allows exact accounting: key and value are the
record's sequence number in ASCII; the query under test must copy ``value`` to its output
topic (any key). Latency is the output record's arrival at this process minus its send time
here (one clock, both Kafka hops included). Every record the broker acknowledged must come
out at least once; duplicates are counted, not failed (at-least-once).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import confluent_kafka as ck
import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

from appliance.trigger import MICROBATCH  # noqa: E402

SAMPLE_S = 0.5
_PACE_S = 0.002
_PAGE = 4096


def rss_bytes(pid: int) -> int:
    """Resident set size of ``pid`` (Linux /proc), 0 once the process is gone."""
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, IndexError, ValueError):
        return 0


@dataclass
class Sample:
    t: float                # seconds since the run started
    acked: int              # records the broker acknowledged so far
    delivered: int          # distinct records seen on the output topic so far
    rss: dict[str, int]     # bytes per watched process


@dataclass
class PhaseMark:
    name: str
    rate: float
    start: float
    end: float


@dataclass
class OverloadReport:
    phases: list[PhaseMark]
    samples: list[Sample]
    latency_by_second: list[tuple[int, float, float]]   # (second, p50 ms, p99 ms)
    acked: int
    delivered: int
    lost: int
    duplicates: int
    unacked: int
    drain_s: float | None
    extra: dict = field(default_factory=dict)

    @property
    def rss_peak(self) -> dict[str, int]:
        names = {n for s in self.samples for n in s.rss}
        return {n: max(s.rss.get(n, 0) for s in self.samples) for n in sorted(names)}

    def max_lag(self, start: float = 0.0, end: float = float("inf")) -> int:
        """Most records acknowledged but not yet delivered, between ``start`` and ``end``
        (run seconds)."""
        return max((s.acked - s.delivered for s in self.samples if start <= s.t <= end),
                   default=0)

    def latency_p50(self, start: float, end: float) -> float | None:
        """Median of the per-second medians between ``start`` and ``end`` (run seconds)."""
        values = sorted(p50 for sec, p50, _ in self.latency_by_second if start <= sec < end)
        return values[len(values) // 2] if values else None

    def summary(self) -> dict:
        return {"acked": self.acked, "delivered": self.delivered, "lost": self.lost,
                "duplicates": self.duplicates, "unacked": self.unacked,
                "drain_s": self.drain_s, "rss_peak_mb": {n: round(v / 2**20, 1)
                                                         for n, v in self.rss_peak.items()},
                "max_lag": self.max_lag(),
                "phases": [vars(p) for p in self.phases], **self.extra}


class _Producer(threading.Thread):
    """Sends sequence numbers at the current target rate (open loop: it catches up, never
    waits for the query), remembering each record's send time and acknowledgement."""

    def __init__(self, bootstrap: str, topic: str, partitions: int):
        super().__init__(daemon=True, name="overload-producer")
        self.producer: ck.Producer | None = ck.Producer({
            "bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all",
            "queue.buffering.max.messages": 2_000_000, "enable.idempotence": False})
        self.topic, self.partitions = topic, partitions
        self.sent_ns: list[int] = []
        self.acked_flags = bytearray()  # 1 at a sequence number the broker acknowledged
        self.acked = 0
        self.failed = 0
        self.rate = 0.0
        self._base_count = 0
        self._base_t = time.monotonic()
        self._lock = threading.Lock()
        self._stopping = threading.Event()

    def set_rate(self, rate: float) -> None:
        with self._lock:
            self._base_count = len(self.sent_ns)
            self._base_t = time.monotonic()
            self.rate = rate

    def _on_ack(self, err, msg) -> None:
        if err is None:
            self.acked_flags[int(msg.value())] = 1
            self.acked += 1
        else:
            self.failed += 1

    def run(self) -> None:
        producer = self.producer
        assert producer is not None, "stop() drops the producer only after run() ended"
        while not self._stopping.is_set():
            with self._lock:
                due = self._base_count + int(self.rate * (time.monotonic() - self._base_t))
            while len(self.sent_ns) < due and not self._stopping.is_set():
                seq = len(self.sent_ns)
                data = str(seq).encode()
                try:
                    producer.produce(self.topic, value=data, key=data,
                                     partition=seq % self.partitions,
                                     on_delivery=self._on_ack)
                except BufferError:
                    producer.poll(0.05)
                    continue
                self.sent_ns.append(time.time_ns())
                self.acked_flags.append(0)
            producer.poll(0)
            time.sleep(_PACE_S)

    def stop(self, flush_s: float = 60) -> None:
        self._stopping.set()
        self.join(timeout=30)
        if self.producer is not None:
            self.producer.flush(flush_s)
            # confluent-kafka closes a producer when its last reference goes: drop it, or
            # it keeps reconnecting to a broker that is gone
            self.producer = None


class _Arrivals(threading.Thread):
    """Reads the output topic from the beginning: first arrival time per sequence number."""

    def __init__(self, bootstrap: str, topic: str, partitions: int):
        super().__init__(daemon=True, name="overload-arrivals")
        self.consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "overload-unused",
                                     "enable.auto.commit": False, "fetch.wait.max.ms": 10})
        self.consumer.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING)
                              for p in range(partitions)])
        self.first_ns: dict[int, int] = {}
        self.duplicates = 0
        self._stopping = threading.Event()

    def run(self) -> None:
        try:
            while not self._stopping.is_set():
                for msg in self.consumer.consume(num_messages=10_000, timeout=0.05):
                    if msg.error() is not None:
                        continue
                    now = time.time_ns()
                    value = msg.value()
                    if value is None:  # not the producer's: every record it sends has one
                        continue
                    seq = int(value)
                    if seq in self.first_ns:
                        self.duplicates += 1
                    else:
                        self.first_ns[seq] = now
        finally:
            self.consumer.close()

    def stop(self) -> None:
        self._stopping.set()
        self.join(timeout=30)


class OverloadRun:
    """One run: ``start()``, then ``phase()`` calls, then ``drain()``, then ``finish()``."""

    def __init__(self, bootstrap: str, source_topic: str, sink_topic: str, partitions: int,
                 watch: dict[str, int]):
        self.producer = _Producer(bootstrap, source_topic, partitions)
        self.arrivals = _Arrivals(bootstrap, sink_topic, partitions)
        self.watch = watch
        self.phases: list[PhaseMark] = []
        self.samples: list[Sample] = []
        self.drain_s: float | None = None
        self._t0 = time.monotonic()
        self._t0_ns = time.time_ns()
        self._stopping = threading.Event()
        self._finished = False
        self._sampler = threading.Thread(target=self._sample_loop, daemon=True,
                                         name="overload-sampler")

    def start(self) -> None:
        self._t0 = time.monotonic()
        self._t0_ns = time.time_ns()
        self.arrivals.start()
        self.producer.start()
        self._sampler.start()

    def now(self) -> float:
        return time.monotonic() - self._t0

    def lag(self) -> int:
        return self.producer.acked - len(self.arrivals.first_ns)

    def _sample_loop(self) -> None:
        while not self._stopping.wait(SAMPLE_S):
            self.samples.append(Sample(self.now(), self.producer.acked,
                                       len(self.arrivals.first_ns),
                                       {n: rss_bytes(p) for n, p in self.watch.items()}))

    def phase(self, name: str, rate: float, seconds: float, check=None) -> None:
        """Sends at ``rate`` for ``seconds``; ``check()`` is called every sample to abort early
        (e.g. raise when the query under test failed)."""
        start = self.now()
        self.producer.set_rate(rate)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if check is not None:
                check()
            time.sleep(min(SAMPLE_S, max(0.0, deadline - time.monotonic())))
        self.phases.append(PhaseMark(name, rate, start, self.now()))

    def drain(self, rate: float, max_lag: int, bound_s: float, check=None) -> float | None:
        """Keeps sending at ``rate`` until the lag is at most ``max_lag`` (or ``bound_s``
        passed); returns the seconds it took, None if the bound passed first."""
        start = self.now()
        self.producer.set_rate(rate)
        deadline = time.monotonic() + bound_s
        took = None
        while time.monotonic() < deadline:
            if check is not None:
                check()
            if self.lag() <= max_lag:
                took = self.now() - start
                break
            time.sleep(SAMPLE_S)
        self.phases.append(PhaseMark("drain", rate, start, self.now()))
        self.drain_s = took
        return took

    def finish(self, settle_s: float = 60) -> OverloadReport:
        """Stops sending, waits (bounded) for the last acknowledged records to come out."""
        self.producer.set_rate(0)
        self.producer.stop()
        deadline = time.monotonic() + settle_s
        while time.monotonic() < deadline and self.lag() > 0:
            time.sleep(SAMPLE_S)
        self.close()
        return self._report()

    def close(self) -> None:
        """Stops every thread (idempotent; after a failure, instead of ``finish``)."""
        if self._finished:
            return
        self._finished = True
        self.producer.set_rate(0)
        self.producer.stop()
        self._stopping.set()
        if self._sampler.is_alive():
            self._sampler.join(timeout=10)
        self.arrivals.stop()

    def _report(self) -> OverloadReport:
        sent = self.producer.sent_ns
        first = self.arrivals.first_ns
        by_second: dict[int, list[float]] = {}
        for seq, arrived in first.items():
            if 0 <= seq < len(sent):
                sec = int((arrived - self._t0_ns) / 1e9)
                by_second.setdefault(sec, []).append((arrived - sent[seq]) / 1e6)
        latency = []
        for sec in sorted(by_second):
            values = sorted(by_second[sec])
            latency.append((sec, values[len(values) // 2],
                            values[min(len(values) - 1, int(len(values) * 0.99))]))
        acked = self.producer.acked
        # records the broker acknowledged that never came out
        lost = sum(1 for seq, ok in enumerate(self.producer.acked_flags)
                   if ok and seq not in first)
        return OverloadReport(
            phases=self.phases, samples=self.samples, latency_by_second=latency,
            acked=acked, delivered=len(first), lost=lost,
            duplicates=self.arrivals.duplicates, unacked=len(sent) - acked,
            drain_s=self.drain_s)


def write_png(report: OverloadReport, path: str | Path, title: str) -> None:
    """Rate, lag, latency and memory over time, phases shaded."""
    fig, axes = plt.subplots(4, 1, figsize=(10, 11), sharex=True)
    try:
        s = report.samples
        t = [x.t for x in s]
        pairs = list(zip(s, s[1:], strict=False))
        rates_in = [0.0] + [(b.acked - a.acked) / (b.t - a.t) for a, b in pairs]
        rates_out = [0.0] + [(b.delivered - a.delivered) / (b.t - a.t) for a, b in pairs]
        axes[0].plot(t, rates_in, label="acknowledged in /s")
        axes[0].plot(t, rates_out, label="delivered out /s")
        axes[0].set_ylabel("records/s")
        axes[0].legend(loc="upper right")
        axes[1].plot(t, [x.acked - x.delivered for x in s], color="tab:red")
        axes[1].set_ylabel("lag (records)")
        secs = [sec for sec, _, _ in report.latency_by_second]
        axes[2].plot(secs, [p50 for _, p50, _ in report.latency_by_second], label="p50")
        axes[2].plot(secs, [p99 for _, _, p99 in report.latency_by_second], label="p99")
        axes[2].set_yscale("log")
        axes[2].set_ylabel("latency ms (by arrival)")
        axes[2].legend(loc="upper right")
        for name in sorted({n for x in s for n in x.rss}):
            axes[3].plot(t, [x.rss.get(name, 0) / 2**20 for x in s], label=f"{name} RSS")
        axes[3].set_ylabel("MiB")
        axes[3].set_xlabel("seconds")
        axes[3].legend(loc="upper right")
        for ax in axes:
            ax.grid(True, alpha=0.3)
            for i, p in enumerate(report.phases):
                ax.axvspan(p.start, p.end, alpha=0.06 if i % 2 else 0.12, color="grey")
        for p in report.phases:
            axes[0].text((p.start + p.end) / 2, 0, p.name, ha="center", va="bottom", fontsize=8)
        fig.suptitle(f"{title}: acked {report.acked:,}, lost {report.lost:,}, "
                     f"duplicates {report.duplicates:,}")
        fig.tight_layout()
        fig.savefig(path, dpi=80)
    finally:
        plt.close(fig)


def sustained_rate(progress: list[dict]) -> float:
    """Records per second a Spark query processed while it had a backlog, from its progress
    reports (the batches' own durations), over the batches that read the backlog's second
    half: the first ones include the query's start and JIT, and the read limit's ramp keeps
    them small, so their per-batch overhead made the query look slower than it is."""
    busy = [p for p in progress if p["numInputRows"] > 0]
    total = sum(p["numInputRows"] for p in busy)
    seen, late = 0, []
    for p in busy:
        if seen >= total / 2:
            late.append(p)
        seen += p["numInputRows"]
    late = late or busy[-1:]
    rows = sum(p["numInputRows"] for p in late)
    ms = sum(p["durationMs"]["triggerExecution"] for p in late)
    if rows <= 0 or ms <= 0:
        raise RuntimeError(f"no busy batches to measure the sustained rate from: {progress}")
    return rows * 1000.0 / ms


CALIBRATION_BACKLOG = 100_000


@dataclass
class Scenario:
    """Calibrate on a backlog, then steady (half the sustainable rate), overload (twice it),
    drain (a quarter of it, until the lag is near zero) and steady again (half).
    ``near_zero_lag``: what arrives at the steady rate during ``near_zero_s``; the drain is
    bounded by ``drain_bound_s``."""

    overload_s: float
    # Large enough that the query's batches reach full size: on 3,000 records its few small
    # batches were mostly per-batch overhead and the calibration said 1,837/s for a relay
    # that then kept up with "twice" that. 20,000 was still too small once the read limit
    # ramps from 500/s: the query kept up with "twice" its 10,958/s for 60 s; on 100,000,
    # counted over its second half, the overload built ~0.9x its seconds of backlog.
    backlog_records: int = CALIBRATION_BACKLOG
    steady_s: float = 5.0
    near_zero_s: float = 4.0
    calibrate_bound_s: float = 600.0  # includes the query's start (slow on crowded cores)

    @property
    def drain_bound_s(self) -> float:
        # the backlog of an overload at 2x (~1x its duration) drains at 0.75x in ~1.3x
        # its duration: a wide margin for shared cores
        return 120 + 8 * self.overload_s


def run_scenario(run: OverloadRun, scenario: Scenario, start_query, progress, failure
                 ) -> tuple[OverloadReport, float | None]:
    """Runs ``scenario``: ``start_query()`` starts the query under test (reading the source
    topic from its beginning), ``progress()`` returns its progress reports (dicts as
    Spark's ``recentProgress``), ``failure()`` its error or None. Returns the report and
    the drain time (None if the lag did not come back near zero within the bound)."""

    def alive() -> None:
        err = failure()
        if err is not None:
            raise RuntimeError(f"the query under test failed: {err}")

    run.start()
    try:
        run.phase("backlog", scenario.backlog_records, 1.0)
        run.producer.set_rate(0)
        start_query()
        if run.drain(0, 0, scenario.calibrate_bound_s, check=alive) is None:
            raise RuntimeError("the calibration backlog did not drain within "
                               f"{scenario.calibrate_bound_s:.0f} s")
        run.phases[-1].name = "calibrate"
        # a batch's records come out when its tasks commit, its progress report a moment
        # later, after the batch's own commit: wait (bounded) for the reports of them all
        deadline = time.monotonic() + 120
        while (sum(p["numInputRows"] for p in progress()) < run.producer.acked
               and time.monotonic() < deadline):
            alive()
            time.sleep(SAMPLE_S)
        rate = sustained_rate(progress())
        near_zero = max(50, int(rate / 2 * scenario.near_zero_s))
        run.phase("steady", rate / 2, scenario.steady_s, check=alive)
        run.phase("overload 2x", rate * 2, scenario.overload_s, check=alive)
        # the drain runs at a quarter of the rate, so a machine that got slower since the
        # calibration (shared cores) still has room to catch up
        drained = run.drain(rate / 4, near_zero, scenario.drain_bound_s, check=alive)
        run.phase("steady after", rate / 2, scenario.steady_s, check=alive)
        report = run.finish()
    finally:
        run.close()
    steady = next(p for p in report.phases if p.name == "steady")
    overload = next(p for p in report.phases if p.name == "overload 2x")
    after = next(p for p in report.phases if p.name == "steady after")
    report.extra.update({
        "overload_s": scenario.overload_s, "sustainable_rate": round(rate),
        "overload_rate": round(rate * 2), "drain_bound_s": scenario.drain_bound_s,
        "near_zero_lag": near_zero,
        # what the overload itself left behind: at exactly twice the query's rate, about
        # the sustainable rate times the overload's seconds
        "overload_max_lag": report.max_lag(overload.start, overload.end),
        "latency_p50_ms_steady": report.latency_p50(steady.start, steady.end),
        "latency_p50_ms_after": report.latency_p50(after.start, after.end),
    })
    return report, drained


#: A costly alert rule stand-in: 10,000 steps of an interpreted higher-order function per
#: row, always true, its start value read from the row. It keeps a relay's sustainable rate
#: (~11,000/s here) low enough for one Python producer to double on a shared machine; with
#: 300 steps the relay kept up with 40,000/s, more than the producer could double.
COSTLY_PREDICATE = "aggregate(sequence(1, 10000), length(value), (acc, x) -> acc + x) > 0"


def start_costly_relay(spark, bootstrap: str, src: str, out: str, checkpoint: str,
                       source_options: dict[str, str]):
    """Starts ``src`` -> COSTLY_PREDICATE -> ``out`` on the appliance-kafka connector, in
    micro-batches as fast as they go, reading ``src`` from its beginning."""
    reader = (spark.readStream.format("appliance-kafka")
              .option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", src).option("startingOffsets", "earliest"))
    for key, value in source_options.items():
        reader = reader.option(key, value)
    return (reader.load().where(COSTLY_PREDICATE).selectExpr("key", "value")
            .writeStream.format("appliance-kafka")
            .option("kafka.bootstrap.servers", bootstrap).option("topic", out)
            .option("checkpointLocation", checkpoint)
            .trigger(**MICROBATCH.eager_trigger_kwargs()).start())
