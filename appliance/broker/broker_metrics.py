"""The broker's Prometheus metrics (``broker_*``), served by ``appliance broker --metrics-port``.

The endpoint has no authentication (Prometheus scrapes it over the network it is bound
to: ``--metrics-host``). What a scrape could tell a stranger is the names of topics and
consumer groups; ``--no-metrics-names`` sums every per-topic and per-group series into
one without labels (the totals stay, the names go).

The event loop only bumps plain integers (a dict entry per API and error, a bucket count
per produce/fetch, two byte counters); everything else (summing buckets, reading every
partition's log end offset, connection count, every consumer group's members, state and
committed offsets) happens when Prometheus scrapes, on the HTTP server's thread. No locks:
the loop is the only writer and the scrape copies what it reads, so a scrape racing a
request may be one request behind, never wrong afterwards.
"""

from __future__ import annotations

import asyncio
import time
from bisect import bisect_left

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

from appliance.broker.groups.consumer_groups import ConsumerGroupState
from appliance.broker.groups.coordinator import GroupState
from appliance.broker.txn.coordinator import AbortReason, TxnCoordinator
from appliance.broker.txn.state_store import TxnStatus
from appliance.broker.wire import errors, schemas

# Request latency upper bounds, seconds: a produce on loopback takes well under a ms; a
# long-polled fetch waits up to its max wait (500 ms by default in the Java client).
LATENCY_BUCKETS_S = (0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1,
                     0.25, 0.5, 1.0, 5.0)
TIMED_APIS = {schemas.PRODUCE.key: "Produce", schemas.FETCH.key: "Fetch"}
ERROR_NAMES = {value: name for name, value in vars(errors).items()
               if name.isupper() and isinstance(value, int)}


def response_error(body) -> int:
    """The response's top-level error code, else the first non-zero per-topic/partition one
    (Produce and Fetch report errors per partition), else 0."""
    if not isinstance(body, dict):
        return errors.NONE
    code = body.get("error_code")
    if code:
        return code
    for value in body.values():
        if isinstance(value, list):
            for item in value:
                if isinstance(item, dict):
                    code = item.get("error_code") or _nested_error(item)
                    if code:
                        return code
    return errors.NONE


def _nested_error(item: dict) -> int:
    for value in item.values():
        if isinstance(value, list):
            for part in value:
                if isinstance(part, dict) and part.get("error_code"):
                    return part["error_code"]
    return errors.NONE


class BrokerMetrics:
    """Counters bumped by ``BrokerServer``/``Connection``; read by ``BrokerCollector``."""

    def __init__(self) -> None:
        self.requests: dict[tuple[int, int], int] = {}  # (api key, error code) -> count
        self.latency_counts = {key: [0] * (len(LATENCY_BUCKETS_S) + 1) for key in TIMED_APIS}
        self.latency_sums = dict.fromkeys(TIMED_APIS, 0.0)
        self.bytes_in = 0
        self.bytes_out = 0
        self.connections_opened = 0

    # -- called on the event loop ---------------------------------------------------------
    def request_done(self, api_key: int, started: float, result) -> None:
        """Count one request; ``result`` is the response body or a Future of it."""
        if isinstance(result, asyncio.Future):
            result.add_done_callback(
                lambda fut: self._finish(api_key, started,
                                         None if fut.cancelled() or fut.exception()
                                         else fut.result()))
        else:
            self._finish(api_key, started, result)

    def _finish(self, api_key: int, started: float, body) -> None:
        code = errors.UNKNOWN_SERVER_ERROR if body is None else response_error(body)
        key = (api_key, code)
        self.requests[key] = self.requests.get(key, 0) + 1
        counts = self.latency_counts.get(api_key)
        if counts is not None:
            elapsed = time.perf_counter() - started
            counts[bisect_left(LATENCY_BUCKETS_S, elapsed)] += 1
            self.latency_sums[api_key] += elapsed


class BrokerCollector:
    """prometheus-client collector over a running ``BrokerServer``."""

    def __init__(self, server) -> None:
        self.server = server
        self.metrics: BrokerMetrics = server.metrics

    def collect(self):
        m = self.metrics
        requests = CounterMetricFamily("broker_requests", "requests answered, by API and error",
                                       labels=["api", "error"])
        for (api_key, code), count in sorted(m.requests.copy().items()):
            schema = schemas.BY_KEY.get(api_key)
            requests.add_metric([schema.name if schema else str(api_key),
                                 ERROR_NAMES.get(code, str(code))], float(count))
        yield requests
        latency = HistogramMetricFamily(
            "broker_request_latency_seconds",
            "request received to response ready (a long-polled fetch includes its wait)",
            labels=["api"])
        for api_key, name in TIMED_APIS.items():
            cumulative, buckets = 0, []
            for bound, count in zip((*LATENCY_BUCKETS_S, float("inf")),
                                    list(m.latency_counts[api_key]), strict=True):
                cumulative += count
                buckets.append(("+Inf" if bound == float("inf") else repr(bound),
                                float(cumulative)))
            latency.add_metric([name], buckets, m.latency_sums[api_key])
        yield latency
        for name, value, text in (
                ("broker_bytes_in", m.bytes_in, "request bytes received"),
                ("broker_bytes_out", m.bytes_out, "response bytes sent"),
                ("broker_connections_opened", m.connections_opened, "connections accepted"),
                ("broker_connections_refused", self.server.connection_cap.refused,
                 "connections closed at once: their IP already had --max-connections-per-ip"),
                ("broker_connections_over_max", self.server.connection_cap.refused_total,
                 "connections closed at once: the broker already had --max-connections"),
                ("broker_connections_idle_closed", self.server.idle_closed,
                 "connections closed after --connections-max-idle-ms without traffic"),
                ("broker_connections_throttled", self.server.connection_rate.throttled,
                 "connections held unread and closed: their IP was over "
                 "--max-connection-creation-rate-per-ip")):
            counter = CounterMetricFamily(name, text)
            counter.add_metric([], float(value))
            yield counter
        denials = CounterMetricFamily(
            "broker_authorization_denials",
            "requests (or parts: a topic, a group) an ACL refused, by API and resource type",
            labels=["api", "resource_type"])
        for (api, rtype), count in sorted(self.server.apis.authorizer.denials.copy().items()):
            denials.add_metric([api, rtype], float(count))
        yield denials
        if self.server.storage is not None:
            yield from self._storage(self.server.storage.stats)
        connections = GaugeMetricFamily("broker_connections", "open client connections")
        connections.add_metric([], float(len(self.server.connections)))
        yield connections
        budget = self.server.registry.budget
        for name, value, text in (
                ("broker_log_bytes", budget.used,
                 "bytes the log holds, every partition (in memory: with bookkeeping)"),
                ("broker_log_budget_bytes", budget.limit,
                 "what the log may hold before the oldest data goes (--retention-total-bytes)")):
            gauge = GaugeMetricFamily(name, text)
            gauge.add_metric([], float(value))
            yield gauge
        evicted = CounterMetricFamily(
            "broker_log_evicted_bytes",
            "bytes the log budget evicted, by reason: read (every consumer group with a "
            "committed offset had read them) or unread (--retention-total-policy "
            "keep-newest took data not every group had read)", labels=["reason"])
        for reason, nbytes in sorted(budget.evicted.copy().items()):
            evicted.add_metric([reason], float(nbytes))
        yield evicted
        refused = CounterMetricFamily(
            "broker_log_budget_refused_produces",
            "partitions' produces refused (retriable KAFKA_STORAGE_ERROR): the log was at "
            "its budget with only unread data left (--retention-total-policy protect-unread)")
        refused.add_metric([], float(budget.refused_produces))
        yield refused
        yield from self._cleaner(self.server.cleaner.stats)
        yield from self._transactions(self.server.apis.txn_coordinator)
        names = self.server.config.metrics_names
        labels_of = ["topic", "partition"] if names else []
        end = GaugeMetricFamily("broker_log_end_offset", "next offset to be written",
                                labels=labels_of)
        start = GaugeMetricFamily("broker_log_start_offset", "oldest offset still stored",
                                  labels=labels_of)
        ends, starts = 0.0, 0.0
        for topic_name, topic in sorted(self.server.registry.topics.copy().items()):
            for part in list(topic.partitions):
                if names:
                    labels = [topic_name, str(part.index)]
                    end.add_metric(labels, float(part.high_watermark))
                    start.add_metric(labels, float(part.log_start_offset))
                ends += part.high_watermark
                starts += part.log_start_offset
        if not names:
            end.add_metric([], ends)
            start.add_metric([], starts)
        yield end
        yield start
        yield from self._groups(names)

    def _groups(self, names: bool):
        """Per consumer group: members, state, generation, rebalances; per partition with a
        committed offset: that offset and the lag behind the log end (records). Without
        ``names``: members, rebalances and lag summed over every group."""
        if not names:
            yield from self._groups_summed()
            return
        offsets = self.server.apis.offsets
        topics = self.server.registry.topics.copy()
        members = GaugeMetricFamily("broker_group_members", "members of the consumer group",
                                    labels=["group"])
        state = GaugeMetricFamily("broker_group_state",
                                  "1 for the group's current state, 0 for the others",
                                  labels=["group", "state"])
        generation = GaugeMetricFamily("broker_group_generation",
                                       "the group's generation (one per completed join)",
                                       labels=["group"])
        rebalances = CounterMetricFamily("broker_group_rebalances",
                                         "rebalances completed (the group reached Stable) "
                                         "since the broker started", labels=["group"])
        committed = GaugeMetricFamily("broker_group_committed_offset",
                                      "the group's committed offset (next record to read)",
                                      labels=["group", "topic", "partition"])
        lag = GaugeMetricFamily("broker_group_lag",
                                "records between the committed offset and the log end",
                                labels=["group", "topic", "partition"])
        for gid, count, states, current, gen, done in sorted(self._group_rows()):
            members.add_metric([gid], float(count))
            for s in states:
                state.add_metric([gid, s], 1.0 if s == current else 0.0)
            generation.add_metric([gid], float(gen))
            rebalances.add_metric([gid], float(done))
            for key, c in sorted(offsets.committed(gid).items()):
                labels = [gid, key.topic, str(key.partition)]
                committed.add_metric(labels, float(c.offset))
                topic = topics.get(key.topic)
                if topic is not None and key.partition < len(topic.partitions):
                    end = topic.partitions[key.partition].high_watermark
                    lag.add_metric(labels, float(max(end - c.offset, 0)))
        yield from (members, state, generation, rebalances, committed, lag)

    def _group_rows(self) -> list[tuple[str, int, tuple[str, ...], str, int, int]]:
        """(group, members, its protocol's states, current state, generation, rebalances)
        of every group: classic ones, and KIP-848 consumer groups (generation: the group
        epoch; rebalances: epochs moved since the broker started)."""
        classic = tuple(s.value for s in GroupState if s is not GroupState.DEAD)
        consumer = tuple(s.value for s in ConsumerGroupState if s is not ConsumerGroupState.DEAD)
        return [(g.group_id, len(g.members), classic, g.state.value, g.generation,
                 g.rebalances) for g in list(self.server.apis.coordinator.groups.values())] + [
            (g.group_id, len(g.members), consumer, g.state().value, g.epoch, g.rebalances)
            for g in list(self.server.apis.consumer_groups.groups.values())]


    def _groups_summed(self):
        offsets = self.server.apis.offsets
        topics = self.server.registry.topics.copy()
        groups = self._group_rows()
        total_lag = 0
        for gid, *_ in groups:
            for key, c in offsets.committed(gid).items():
                topic = topics.get(key.topic)
                if topic is not None and key.partition < len(topic.partitions):
                    total_lag += max(topic.partitions[key.partition].high_watermark
                                     - c.offset, 0)
        for family, name, value, text in (
                (GaugeMetricFamily, "broker_groups", len(groups), "consumer groups"),
                (GaugeMetricFamily, "broker_group_members",
                 sum(row[1] for row in groups), "members of every consumer group"),
                (CounterMetricFamily, "broker_group_rebalances",
                 sum(row[5] for row in groups), "rebalances completed, every group"),
                (GaugeMetricFamily, "broker_group_lag", total_lag,
                 "records between committed offsets and the log end, every group")):
            metric = family(name, text)
            metric.add_metric([], float(value))
            yield metric

    @staticmethod
    def _transactions(coordinator: TxnCoordinator):
        """Transactions: how many ids and open ones the coordinator holds, how old the
        oldest open one is (it holds read_committed consumers back), how they ended."""
        now_ms = time.time() * 1000
        held = list(coordinator.txns.copy().values())
        started = [t.started_ms for t in held if t.status is TxnStatus.ONGOING]
        counts = coordinator.counts
        for family, name, value, text in (
                (GaugeMetricFamily, "broker_transactional_ids", len(held),
                 "transactional ids the coordinator holds"),
                (GaugeMetricFamily, "broker_transactions_ongoing", len(started),
                 "transactions open (Ongoing)"),
                (GaugeMetricFamily, "broker_transaction_oldest_ongoing_seconds",
                 max(now_ms - min(started), 0) / 1000 if started else 0,
                 "age of the oldest open transaction (0: none); read_committed consumers "
                 "of its partitions wait behind it"),
                (CounterMetricFamily, "broker_transactions_committed", counts.committed,
                 "transactions committed (markers written)"),
                (CounterMetricFamily, "broker_transaction_producers_fenced", counts.fenced,
                 "producer epochs bumped over the producer that held the id (a new "
                 "InitProducerId, or a timeout): the older one is fenced")):
            metric = family(name, text)
            metric.add_metric([], float(value))
            yield metric
        aborted = CounterMetricFamily(
            "broker_transactions_aborted",
            "transactions aborted, by reason: requested (EndTxn), timed_out "
            "(transaction.timeout.ms), fenced (a new InitProducerId of the id found it "
            "open), restart (a decision to abort completed at start)", labels=["reason"])
        for reason in AbortReason.ALL:
            aborted.add_metric([reason], float(counts.aborted.get(reason, 0)))
        yield aborted

    @staticmethod
    def _cleaner(stats):
        """The log cleaner (compacted topics): what its passes read, wrote and took."""
        for name, value, text in (
                ("broker_log_cleaner_passes", stats.passes, "compaction passes put in place"),
                ("broker_log_cleaner_read_bytes", stats.bytes_read,
                 "bytes of segments the cleaner read (copied or dropped)"),
                ("broker_log_cleaner_written_bytes", stats.bytes_written,
                 "bytes of cleaned segments written"),
                ("broker_log_cleaner_records_removed", stats.records_removed,
                 "records compaction removed (superseded, or tombstones past "
                 "delete.retention.ms)"),
                ("broker_log_cleaner_seconds", stats.seconds,
                 "time the passes took (read / seconds: MB/s cleaned)"),
                ("broker_log_cleaner_failures", stats.failures,
                 "passes that failed (an I/O error: retried at the next sweep)")):
            counter = CounterMetricFamily(name, text)
            counter.add_metric([], float(value))
            yield counter

    @staticmethod
    def _storage(stats):
        for name, value, text in (
                ("broker_recovery_quarantined_bytes", stats.quarantined_bytes,
                 "bytes the last recovery found not to be valid frames (skipped, copied "
                 "to quarantine files)"),
                ("broker_recovery_quarantined_regions", stats.quarantined_regions,
                 "byte ranges the last recovery found not to be valid frames"),
                ("broker_flush_errors", stats.flush_errors,
                 "fsyncs of already acknowledged data that failed (interval policy, close)")):
            counter = CounterMetricFamily(name, text)
            counter.add_metric([], float(value))
            yield counter
        refused = CounterMetricFamily(
            "broker_storage_append_errors",
            "produces refused because the data directory failed a write (undone), by errno",
            labels=["errno"])
        for errno_name, count in sorted(stats.append_errors.copy().items()):
            refused.add_metric([errno_name], float(count))
        yield refused


def serve(server, host: str, port: int):
    """Start the HTTP endpoint for ``server``; returns (http server, bound port)."""
    registry = CollectorRegistry()
    registry.register(BrokerCollector(server))
    http, _thread = start_http_server(port, addr=host, registry=registry)
    return http, http.server_port
