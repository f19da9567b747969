"""Run a load: optional floor phase, then the main phase; returns a ``Report``.

``run_load(config)`` is the Python API (``appliance demo`` calls it). Producers run in
their own processes, the collector in this one; the two only share the start time and a
few progress counters, so a slow appliance can never slow the schedule down.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

from appliance.logs import get_logger
from loadgen.admin import check_broker, ensure_topics
from loadgen.collector import ALERTS, FLOOR, BrokerUnavailable, Collector
from loadgen.config import LoadConfig
from loadgen.events import EventFactory
from loadgen.metrics import RunMetrics
from loadgen.phase import Phase, build_report
from loadgen.producer import LAG_S, SENT, SLOTS, WorkerSpec, spawn_context, worker_main
from loadgen.progress import Progress
from loadgen.report import Report

log = get_logger("loadgen.run")
START_LEAD_S = 0.3  # all workers are waiting when the schedule starts
READY_TIMEOUT_S = 60.0
POLL_S = 0.02
HOUSEKEEPING_S = 0.25
FLOOR_KEYS = ("p50", "p90", "p99", "p999", "max")


def run_load(config: LoadConfig) -> Report:
    """Measure the floor (if asked), then run the load; raises BrokerUnavailable."""
    config.validate()
    started_at = datetime.now(UTC).isoformat(timespec="seconds")
    check_broker(config.bootstrap, security=config.security)
    ensure_topics(config, [config.events_topic, config.alerts_topic, config.dlq_topic])
    floor = measure_floor_for(config)
    metrics = RunMetrics()
    if config.metrics_port:
        metrics.serve(config.metrics_port, config.metrics_host)
    try:
        metrics.target_rate.set(config.rate)
        metrics.set_floor(floor)
        factory = EventFactory(config.run_id, config.alert_ratio, config.bad_ratio)
        phase = _measure(config, ALERTS, factory, config.schedule(), config.events_topic,
                         config.alerts_topic, config.dlq_topic, metrics)
        metrics.lost.inc(phase.lost)
    finally:
        metrics.close()
    return build_report(config, phase, ALERTS, floor, started_at)


def run_floor(config: LoadConfig) -> Report:
    """The instrument alone: produce to ``floor_topic`` and consume it back."""
    config.validate()
    started_at = datetime.now(UTC).isoformat(timespec="seconds")
    check_broker(config.bootstrap, security=config.security)
    ensure_topics(config, [config.floor_topic])
    factory = EventFactory(config.run_id, 0.0, 0.0)
    phase = _measure(config, FLOOR, factory, config.schedule(), config.floor_topic,
                     config.floor_topic, None, None)
    latency = phase.collector.latency.summary()
    floor = {"source": "this run", **{k: latency[k] for k in FLOOR_KEYS},
             "rate": config.rate, "seconds": config.duration, "lost": phase.lost}
    return build_report(config, phase, FLOOR, floor, started_at)


def measure_floor_for(config: LoadConfig) -> dict | None:
    if config.floor_ms is not None:
        return {"source": "given", "p50": None, "p99": config.floor_ms, "max": None,
                "rate": None}
    if config.floor_seconds <= 0:
        return None
    rate = config.floor_rate or config.rate
    floor_cfg = LoadConfig(
        bootstrap=config.bootstrap, rate=rate, duration=config.floor_seconds,
        workers=config.workers, grace=min(config.grace, 5.0), floor_topic=config.floor_topic,
        topic_partitions=config.topic_partitions, linger_ms=config.linger_ms,
        progress=config.progress, behind_ms=config.behind_ms, run_id=config.run_id + "f",
        security=config.security,
    )
    measured = run_floor(floor_cfg).floor_ms
    if measured is None:
        raise RuntimeError("the floor run measured no latency (no record came back)")
    return {**measured, "source": "measured"}


def _measure(config, mode, factory, schedule, produce_topic, answer_topic, dlq_topic,
             metrics) -> Phase:
    collector = Collector(config.bootstrap, factory, schedule.total, answer_topic, dlq_topic,
                          mode, on_latency=metrics.observe_latency_ms if metrics else None,
                          security=config.security)
    collector.start()
    try:
        return _measure_with(config, mode, factory, schedule, produce_topic, collector,
                             metrics)
    finally:
        collector.close()


def _measure_with(config, mode, factory, schedule, produce_topic, collector, metrics) -> Phase:
    ctx = spawn_context()
    progress_arr = ctx.RawArray("d", SLOTS * config.workers)
    t0_value = ctx.RawValue("d", 0.0)
    ready_q, result_q, start = ctx.Queue(), ctx.Queue(), ctx.Event()
    procs = []
    try:
        for w in range(config.workers):
            spec = WorkerSpec(w, config.workers, config.bootstrap, produce_topic, schedule,
                              factory.run_id, factory.alert_ratio, factory.bad_ratio,
                              config.behind_ms, config.drain_s, config.linger_ms,
                              config.retry_s, config.security)
            proc = ctx.Process(target=worker_main, name=f"loadgen-producer-{w}", daemon=True,
                               args=(spec, progress_arr, t0_value, ready_q, start, result_q))
            proc.start()
            procs.append(proc)
        _await_ready(ready_q, config.workers, procs)
        t0 = time.time() + START_LEAD_S
        t0_value.value = t0
        collector.t0_ms = t0 * 1000.0
        start.set()
        log.info("run.started", run_id=factory.run_id, mode=mode, rate=schedule.rate,
                 duration=schedule.duration, workers=config.workers, events=schedule.total)
        results = _collect_while_sending(config, collector, schedule, t0, procs, progress_arr,
                                         result_q, metrics, mode)
    finally:
        start.set()
        for proc in procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.terminate()
                proc.join(timeout=5)
    return _grace(config, collector, schedule, t0, results, metrics)


def _await_ready(ready_q, workers: int, procs) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    ready = 0
    while ready < workers:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise BrokerUnavailable("producer workers did not become ready in time")
        try:
            status, worker, detail = ready_q.get(timeout=min(remaining, 1.0))
        except Exception:  # queue.Empty; check the workers are alive
            if any(not p.is_alive() and p.exitcode not in (None, 0) for p in procs):
                codes = [p.exitcode for p in procs]
                raise RuntimeError(f"a producer worker died while starting (exit codes "
                                   f"{codes}; see its traceback above)") from None
            continue
        if status == "error":
            raise BrokerUnavailable(f"producer worker {worker}: {detail}")
        ready += 1


def _collect_while_sending(config, collector, schedule, t0, procs, progress_arr, result_q,
                           metrics, mode) -> list:
    label = "floor" if mode == FLOOR else "run"
    progress = Progress(label, schedule.rate, config.behind_ms, config.progress)
    # Bounded: the workers give up at duration + drain, re-send unacknowledged events for
    # at most retry_s, then flush within 30 s.
    deadline = t0 + schedule.duration + config.drain_s + config.retry_s + 45.0
    results: dict[int, object] = {}
    next_housekeeping = 0.0
    while len(results) < config.workers:
        collector.poll(POLL_S)
        # Everything below costs the collector time (the p99 alone ~1 ms), which would
        # show up as latency: do it a few times a second, not after every poll.
        if time.monotonic() < next_housekeeping:
            continue
        next_housekeeping = time.monotonic() + HOUSEKEEPING_S
        while not result_q.empty():
            result = result_q.get()
            results[result.worker] = result
        sent = int(sum(progress_arr[w * SLOTS + SENT] for w in range(config.workers)))
        lag_ms = 1000.0 * max(progress_arr[w * SLOTS + LAG_S] for w in range(config.workers))
        if metrics is not None:
            metrics.update(sent, collector.received, collector.dlq_received,
                           collector.duplicates, lag_ms / 1000.0)
        if progress.due():
            p99 = collector.latency.percentile_ms(99.0) if collector.latency.count else None
            progress.show(time.time() - t0, sent, collector.received, collector.dlq_received,
                          lag_ms, p99)
        if time.time() > deadline:
            raise RuntimeError("producer workers did not finish in time")
        dead = [p for p in procs if not p.is_alive() and p.exitcode not in (None, 0)]
        if dead and result_q.empty():
            raise RuntimeError(f"producer worker {dead[0].name} died "
                               f"(exit code {dead[0].exitcode})")
    progress.done()
    return [results[w] for w in sorted(results)]


def _grace(config, collector, schedule, t0, results, metrics) -> Phase:
    workers = config.workers
    sent_ranges = [schedule.worker_indices(r.worker, workers, r.sent) for r in results]
    failed = {i for r in results for i in r.failed}
    expected_alerts, expected_dlq = collector.expected(sent_ranges, failed)
    sending_ended = max([t0 + schedule.duration] + [r.finished_at for r in results])
    deadline = sending_ended + config.grace
    while time.time() < deadline:
        good = collector.received - collector.unexpected_alerts
        if good >= expected_alerts and collector.dlq_received >= expected_dlq:
            break
        collector.poll(POLL_S)
    # Pick up anything already delivered (duplicates, stragglers) without waiting.
    while collector.poll(0.05):
        pass
    if metrics is not None:
        sent = sum(r.sent for r in results)
        metrics.update(sent, collector.received, collector.dlq_received, collector.duplicates,
                       max(r.max_lag_ms for r in results) / 1000.0)
    lost, dlq_lost = collector.missing(sent_ranges, failed)
    return Phase(collector, results, schedule, t0, sending_ended, expected_alerts,
                 expected_dlq, lost, dlq_lost)
