"""The pair's Prometheus metrics: this instance's role, its takeovers, how long the last
one took. Each instance serves its own; ``AppliancePairNoStandby`` (dashboards/prometheus)
counts the standbys of each group."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from appliance.ha.election import Election


class HaCollector:
    """prometheus-client collector over this instance's ``Election`` (nothing before it
    joined its pair: the metrics endpoint starts before that)."""

    def __init__(self, election: Callable[[], Election | None]) -> None:
        self.election = election

    def collect(self):
        e = self.election()
        if e is None:
            return
        labels = [e.settings.group, e.settings.instance]
        role = GaugeMetricFamily(
            "appliance_ha_role", "this instance's role in its pair: 1 active, 0 standby, "
            "-1 fenced (stopping)", labels=["group", "member"])
        role.add_metric(labels, float(e.role.value))
        yield role
        takeovers = CounterMetricFamily(
            "appliance_ha_takeovers", "times this process became the active instance",
            labels=["group", "member"])
        takeovers.add_metric(labels, float(e.takeovers))
        yield takeovers
        if e.takeover_s is not None:
            took = GaugeMetricFamily(
                "appliance_ha_takeover_seconds", "from Kafka assigning this instance the "
                "active role to its query processing events, the last time",
                labels=["group", "member"])
            took.add_metric(labels, e.takeover_s)
            yield took
