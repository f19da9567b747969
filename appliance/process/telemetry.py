"""What the appliance shows an operator while it runs, wired to what it runs: the
``appliance_*`` metrics, the rules' metrics, the in-band alert latency, ``[ha]``'s role,
and the HTTP endpoint serving them with the rules' JSON pages.

The collectors themselves are ``appliance.observability``; this module knows where each
gets its facts (the query's probes, the running rules, the broker, the pair's election)
and stops its threads and the endpoint at the stop.

This module imports prometheus_client: the runner imports it only once the checks that
need no JVM have passed (``appliance.process.runner``).
"""

from __future__ import annotations

from collections.abc import Callable
from wsgiref.simple_server import WSGIServer

from prometheus_client.registry import Collector

from appliance.ha.election import Election
from appliance.ha.ha_metrics import HaCollector
from appliance.ha.kafka_offsets import PairOffsets
from appliance.observability.alert_latency import AlertObserver, LatencyHistogram
from appliance.observability.http import serve
from appliance.observability.metrics import ApplianceCollector, MetricsPoller
from appliance.observability.rules_metrics import RulesCollector
from appliance.process.query_probes import QueryProbes
from appliance.process.reload_status import STATUS_PATH
from appliance.process.run_settings import RunSettings
from appliance.process.running_rules import RunningRules
from appliance.rules.book_stats import PAGE_PATH as STATS_PATH
from appliance.tuning import IDLE_PROGRESS_INTERVAL_MS


class Telemetry:
    """The metrics' collectors, the threads feeding them and the endpoint, once started."""

    def __init__(self, collector: ApplianceCollector, poller: MetricsPoller,
                 observer: AlertObserver | None, server: WSGIServer, port: int) -> None:
        self.collector = collector
        self.poller = poller
        self.observer = observer
        self.server = server
        self.port = port

    @classmethod
    def start(cls, settings: RunSettings, rules: RunningRules, probes: QueryProbes, *,
              recovered: bool, status_page: Callable[[], dict[str, object]],
              election: Callable[[], Election | None] | None = None) -> Telemetry:
        """Collectors and their feeds started, the endpoint serving on ``[metrics]``'s
        address; ``election``: the pair's (``[ha]``), for its role; ``recovered``: the
        query resumed from an existing checkpoint."""
        config, mode = settings.config, settings.mode
        collector = ApplianceCollector(
            mode.name, recovered=recovered,
            progress_interval_s=mode.progress_interval_s(config.query.trigger_interval,
                                                         IDLE_PROGRESS_INTERVAL_MS))
        rule_set = rules.running_rules()
        top_rules = config.metrics.top_rules
        rules_metrics = rules.rules_metrics = RulesCollector(
            rule_set.version, len(rule_set), stats=rules.rule_book().stats,
            top_rules=top_rules)
        # A pair's instances count their lag from the offsets the pair committed to
        # Kafka: a waiting standby's own checkpoint is as old as its last turn. A lone one
        # from its query's (for a real-time query, inside its running batch too).
        events = config.topics.events
        processed = (PairOffsets(settings.client(), config.ha.group, events)
                     if config.ha.group is not None else lambda: probes.processed(events))
        poller = MetricsPoller(collector, settings.client(), config.topics,
                               config.query.checkpoint_dir, probes.active,
                               last_progress=probes.last_progress_time,
                               processed=processed)
        poller.start()
        collectors: list[Collector] = [collector, rules_metrics]
        if election is not None:
            collectors.append(HaCollector(election))
        observer = None
        if config.metrics.alert_latency:
            histogram = LatencyHistogram()
            observer = AlertObserver(histogram, settings.client(), config.topics.alerts)
            observer.start()
            collectors.extend((histogram, observer))
        server, port = serve(
            collectors, config.metrics.host, config.metrics.port,
            pages={STATUS_PATH: status_page,
                   STATS_PATH: lambda: rules_metrics.book_stats().page(top_rules)})
        return cls(collector, poller, observer, server, port)

    def count_recovery(self) -> None:
        """The query started again from its checkpoint after these metrics started."""
        self.collector.recoveries += 1

    def stop_feeds(self) -> None:
        """Stop the threads polling the checkpoint and Kafka (``metrics``)."""
        self.poller.stop()

    def stop_observer(self) -> None:
        """Stop the alert latency's consumer (``alert_latency``), if there is one."""
        if self.observer is not None:
            self.observer.stop()

    def close_server(self) -> None:
        """Stop the endpoint and release its port."""
        self.server.shutdown()
        self.server.server_close()
