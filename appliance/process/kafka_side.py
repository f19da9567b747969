"""The Kafka a run uses: the configured cluster, or an embedded broker started for it,
and the appliance's topics on it.

On the embedded broker the appliance creates its topics; on an operator's cluster it only
checks that they are there (creating topics there is the operator's call), and uses the
warm-up topic only if it exists.
"""

from __future__ import annotations

from appliance import logs
from appliance.broker import EmbeddedBroker
from appliance.config import Config
from appliance.process.embedded_kafka import start_embedded
from appliance.topics import default_partitions, ensure_topics, partition_counts

log = logs.get_logger("appliance")

#: Partitions of the warm-up topic the appliance creates on its embedded broker.
WARMUP_PARTITIONS = 2


class KafkaSide:
    """The broker's address, the embedded broker if this run started one, the topics."""

    def __init__(self, config: Config, broker: EmbeddedBroker | None, bootstrap: str) -> None:
        self.config = config
        self.broker = broker
        self.bootstrap = bootstrap
        self.partitions: dict[str, int] = {}  # the appliance's topics', once ensured

    @classmethod
    def start(cls, config: Config) -> KafkaSide:
        """The configured Kafka, else a started embedded broker (``broker.embedded``)."""
        bootstrap = config.kafka.bootstrap_servers
        if bootstrap is not None:
            return cls(config, None, bootstrap)
        output = logs.output()  # on a terminal, the broker's lines join the log file
        broker = start_embedded(config.kafka, output.file if output else None)
        if broker.bootstrap is None:  # start() returns once the broker said where it is
            broker.__exit__(None, None, None)
            raise RuntimeError("the embedded broker started without a bootstrap address")
        log.info("broker.embedded", bootstrap=broker.bootstrap)
        return cls(config, broker, broker.bootstrap)

    def ensure_topics(self, client: dict) -> dict[str, int]:
        """The appliance's topics and their partitions (created on the embedded broker;
        ``TopicError`` when one is missing elsewhere)."""
        self.partitions = ensure_topics(client, default_partitions(self.config.topics),
                                        create=self.broker is not None)
        log.info("topics.ready", partitions=self.partitions)
        return self.partitions

    @property
    def events_partitions(self) -> int:
        return self.partitions[self.config.topics.events]

    def warmup_topic(self, client: dict) -> str | None:
        """The warm-up topic if usable: created on the embedded broker; on an external
        cluster only if it exists."""
        if not self.config.query.warmup:
            return None
        name = self.config.topics.warmup
        if self.broker is not None:
            ensure_topics(client, {name: WARMUP_PARTITIONS}, create=True)
            return name
        try:
            return name if partition_counts(client, [name])[name] else None
        except Exception:  # noqa: BLE001 - no warm-up topic only means a plan-only warm-up
            return None

    def broker_pids(self) -> list[int]:
        """The embedded broker's process, whose CPUs ``[cpus] after_ready`` leaves alone."""
        proc = self.broker.proc if self.broker is not None else None
        return [proc.pid] if proc is not None else []

    def close(self) -> None:
        """Stop the embedded broker, if this run started one (once)."""
        broker, self.broker = self.broker, None
        if broker is not None:
            broker.__exit__(None, None, None)
