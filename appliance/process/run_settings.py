"""What one run of the appliance is set to, worked out once: its pieces receive it.

The trigger mode's tuning (``appliance.tuning``), the kafka-python client settings and the
connector's source, sink and query options all follow from the config and the broker's
address, and none of them changes while the appliance runs. Each used to be derived again
wherever a piece needed it; now ``RunSettings.for_broker`` derives them once, as soon as
the broker's address is known (an embedded broker's only after it started), and the
broker's topics, the warm-up, the query, the metrics and an ``[ha]`` pair all read the
same value.

Precedence of the connector options (one definition for the query and its warm-up, so
both share the cached producer): the bootstrap, then the tuning, then the operator's or
the deploy's ``[source]``/``[sink]`` options, then the ``[kafka]`` client properties in
their Java spelling (``client_security``: credentials given as ``sasl.username`` and
``sasl.password`` become ``sasl.jaas.config``, a PEM CA a truststore), which apply to both.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from appliance.config import Config
from appliance.topics import client_config
from appliance.trigger import TriggerMode
from appliance.tuning import Tuning, tuning_for


def _frozen(options: Mapping[str, str]) -> Mapping[str, str]:
    return MappingProxyType(dict(options))


@dataclass(frozen=True, eq=False)
class RunSettings:
    """The config, the broker's address and every setting derived from them, for one run."""

    config: Config
    bootstrap: str                    # the broker's address (embedded: once it started)
    tuning: Tuning                    # the trigger mode's (``appliance.tuning.tuning_for``)
    source_options: Mapping[str, str]  # the connector's reader options, topic aside
    sink_options: Mapping[str, str]    # the connector's writer options
    _client: Mapping[str, object]      # kafka-python keyword arguments (``client``)

    @classmethod
    def for_broker(cls, config: Config, bootstrap: str) -> RunSettings:
        query = config.query
        tuning = tuning_for(query.mode, query.async_progress)
        passthrough = {f"kafka.{k}": v for k, v in config.kafka.java_properties.items()}
        address = {"kafka.bootstrap.servers": bootstrap}
        return cls(
            config=config, bootstrap=bootstrap, tuning=tuning,
            source_options=_frozen({**address, **tuning.source_options,
                                    **config.source.options, **passthrough}),
            sink_options=_frozen({**address, **tuning.sink_options,
                                  **config.sink.options, **passthrough}),
            _client=_frozen(client_config(config.kafka, bootstrap)),
        )

    @property
    def mode(self) -> TriggerMode:
        return self.config.query.mode

    def client(self) -> dict:
        """kafka-python keyword arguments (``appliance.topics.client_config``): a copy of
        its own for each caller, who may add to it."""
        return dict(self._client)

    def reader_options(self, starting_offsets: str | None = None) -> dict[str, str]:
        """The query's source options: the events topic, where it starts (``[ha]``: the
        pair's offsets in Kafka, else ``[query] starting_offsets``), then the rest, as
        they always were (the operator's ``[source]`` options after topic and offsets)."""
        query = self.config.query
        return {"subscribe": self.config.topics.events,
                "startingOffsets": starting_offsets or query.starting_offsets,
                **self.source_options}

    def writer_options(self) -> dict[str, str]:
        """The query's sink options and its own (async progress...)."""
        return {**self.sink_options, **self.tuning.query_options}
