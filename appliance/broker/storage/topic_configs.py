"""Topic and broker configs as Kafka tools see them: one table, each row saying what this
broker does with the setting.

kafka-configs, kafka-ui, AKHQ and the admin clients describe a topic's configs first and
alter them by name. A topic config here is either LIVE (stored with the topic, in force
from the next request or retention sweep, and the same after a restart) or FIXED: this
broker has exactly one behaviour (no compaction, batches kept as the producer compressed
them, one replica, the producer's timestamps), so only that value is accepted and any
other is refused with the reason, instead of being stored and silently ignored. A name
that is not in the table is refused too, as Kafka refuses unknown topic configs.

Broker configs are read-only: they come from ``appliance broker``'s flags.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from appliance.broker.settings import DEFAULT_MAX_MESSAGE_BYTES, BrokerConfig


class ConfigType(enum.IntEnum):
    """DescribeConfigs v3+ ``config_type``."""

    BOOLEAN = 1
    STRING = 2
    INT = 3
    LONG = 5
    LIST = 7


class ConfigSource(enum.IntEnum):
    """DescribeConfigs v1+ ``config_source``."""

    DYNAMIC_TOPIC_CONFIG = 1
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


class ResourceType(enum.IntEnum):
    TOPIC = 2
    BROKER = 4


class ConfigError(ValueError):
    """A config name or value this broker refuses (INVALID_CONFIG); the message says why."""


def _integer(minimum: int) -> Callable[[str], None]:
    def check(value: str) -> None:
        try:
            n = int(value)
        except ValueError:
            raise ConfigError(f"must be an integer >= {minimum}, got {value!r}") from None
        if n < minimum:
            raise ConfigError(f"must be an integer >= {minimum}, got {n}")
    return check


@dataclass(frozen=True)
class TopicConfig:
    name: str
    type: ConfigType
    broker_synonym: str  # the broker-wide setting it defaults to, Kafka's name
    doc: str
    broker_value: Callable[[BrokerConfig], str] | None = None  # LIVE: the broker's default
    broker_flag_set: Callable[[BrokerConfig], bool] | None = None  # set by a flag
    check: Callable[[str], None] | None = None  # LIVE: raises ConfigError
    fixed: str | None = None  # FIXED: the only value accepted
    why_fixed: str = ""

    @property
    def live(self) -> bool:
        return self.fixed is None

    def validate(self, value: str | None) -> str:
        if value is None:
            raise ConfigError(f"{self.name}: a value is required")
        if self.fixed is not None:
            if value.strip() != self.fixed:
                raise ConfigError(f"{self.name}: only {self.fixed!r} is supported "
                                  f"({self.why_fixed}), got {value!r}")
            return self.fixed
        assert self.check is not None
        try:
            self.check(value)
        except ConfigError as exc:
            raise ConfigError(f"{self.name}: {exc}") from None
        return value.strip()

    def default(self, config: BrokerConfig) -> str:
        if self.fixed is not None:
            return self.fixed
        if self.broker_value is None:  # a table entry with neither: a defect of the table
            raise ConfigError(f"{self.name}: no fixed value and no broker default")
        return self.broker_value(config)

    def default_source(self, config: BrokerConfig) -> ConfigSource:
        if self.broker_flag_set is not None and self.broker_flag_set(config):
            return ConfigSource.STATIC_BROKER_CONFIG
        return ConfigSource.DEFAULT_CONFIG


def _or_unlimited(v: int | None) -> str:
    return "-1" if v is None else str(v)


TOPIC_CONFIGS: tuple[TopicConfig, ...] = (
    TopicConfig("retention.ms", ConfigType.LONG, "log.retention.ms",
                "Batches appended longer ago than this are deleted (-1: kept by age forever).",
                broker_value=lambda c: _or_unlimited(c.retention_ms),
                broker_flag_set=lambda c: c.retention_ms is not None, check=_integer(-1)),
    TopicConfig("retention.bytes", ConfigType.LONG, "log.retention.bytes",
                "Per partition: the oldest batches are deleted while the partition is "
                "larger (-1: no size limit).",
                broker_value=lambda c: _or_unlimited(c.retention_bytes),
                broker_flag_set=lambda c: c.retention_bytes is not None, check=_integer(-1)),
    TopicConfig("max.message.bytes", ConfigType.INT, "message.max.bytes",
                "The largest record batch a produce may append.",
                broker_value=lambda c: str(c.max_message_bytes),
                broker_flag_set=lambda c: c.max_message_bytes != DEFAULT_MAX_MESSAGE_BYTES,
                check=_integer(0)),
    TopicConfig("segment.bytes", ConfigType.INT, "log.segment.bytes",
                "With --data-dir: a partition starts a new segment file after this many "
                "bytes (retention deletes whole segment files).",
                broker_value=lambda c: str(c.segment_bytes),
                broker_flag_set=lambda c: c.segment_bytes != 64 * 1024 * 1024,
                check=_integer(14)),
    TopicConfig("cleanup.policy", ConfigType.LIST, "log.cleanup.policy",
                "Old batches are deleted by retention.", fixed="delete",
                why_fixed="log compaction is not implemented"),
    TopicConfig("compression.type", ConfigType.STRING, "compression.type",
                "Batches are stored as the producer compressed them.", fixed="producer",
                why_fixed="the broker never recompresses"),
    TopicConfig("min.insync.replicas", ConfigType.INT, "min.insync.replicas",
                "A single broker holds the single replica.", fixed="1",
                why_fixed="single-broker cluster"),
    TopicConfig("message.timestamp.type", ConfigType.STRING, "log.message.timestamp.type",
                "Records keep the producer's timestamps.", fixed="CreateTime",
                why_fixed="batches are stored unchanged"),
)
BY_NAME = {c.name: c for c in TOPIC_CONFIGS}


def spec(name: str) -> TopicConfig:
    found = BY_NAME.get(name)
    if found is None:
        raise ConfigError(f"unknown topic config {name!r} (this broker knows "
                          f"{', '.join(sorted(BY_NAME))})")
    return found


def validate(configs: Mapping[str, str | None]) -> dict[str, str]:
    """The configs a topic stores; raises ConfigError for an unknown name or a bad value.

    FIXED configs are accepted at their one value and not stored (they cannot differ).
    """
    out = {}
    for name, value in configs.items():
        s = spec(name)
        checked = s.validate(value)
        if s.live:
            out[name] = checked
    return out


def stored(configs: dict[str, str]) -> tuple[dict[str, str], set[str]]:
    """(the LIVE configs among a recovered topic's, the names left out): FIXED ones cannot
    differ and unknown ones never had an effect; keeping them would make every later
    alteration of the topic fail its validation."""
    kept = {k: v for k, v in configs.items() if k in BY_NAME and BY_NAME[k].live}
    return kept, set(configs) - set(kept)


@dataclass(frozen=True)
class BrokerSetting:
    """A read-only broker config: Kafka's name, read from the running broker's settings."""

    name: str
    type: ConfigType
    value: Callable[[BrokerConfig], str | None]
    doc: str

    def source(self, config: BrokerConfig) -> ConfigSource:
        """Set by a flag (differs from a broker started without flags), or the default."""
        return (ConfigSource.DEFAULT_CONFIG if self.value(config) == self.value(BrokerConfig())
                else ConfigSource.STATIC_BROKER_CONFIG)


def _bool(v: bool) -> str:
    return "true" if v else "false"


BROKER_SETTINGS: tuple[BrokerSetting, ...] = (
    BrokerSetting("node.id", ConfigType.INT, lambda c: str(c.node_id), "This broker's id."),
    BrokerSetting("broker.id", ConfigType.INT, lambda c: str(c.node_id), "Same as node.id."),
    BrokerSetting("log.dirs", ConfigType.STRING, lambda c: c.data_dir,
                  "--data-dir (null: in memory)."),
    BrokerSetting("log.retention.ms", ConfigType.LONG, lambda c: _or_unlimited(c.retention_ms),
                  "--retention-ms: the topics' default retention.ms."),
    BrokerSetting("log.retention.bytes", ConfigType.LONG,
                  lambda c: _or_unlimited(c.retention_bytes),
                  "--retention-bytes: the topics' default retention.bytes."),
    BrokerSetting("message.max.bytes", ConfigType.INT, lambda c: str(c.max_message_bytes),
                  "--max-message-bytes: the topics' default max.message.bytes."),
    BrokerSetting("log.segment.bytes", ConfigType.INT, lambda c: str(c.segment_bytes),
                  "--segment-bytes: the topics' default segment.bytes."),
    BrokerSetting("auto.create.topics.enable", ConfigType.BOOLEAN,
                  lambda c: _bool(c.auto_create_topics), "--auto-create-topics."),
    BrokerSetting("num.partitions", ConfigType.INT, lambda c: str(c.default_partitions),
                  "--default-partitions: partitions of an auto-created topic."),
    BrokerSetting("default.replication.factor", ConfigType.INT, lambda c: "1",
                  "A single broker: one replica."),
    BrokerSetting("socket.request.max.bytes", ConfigType.INT, lambda c: str(c.max_frame_bytes),
                  "Largest request frame accepted."),
    BrokerSetting("group.min.session.timeout.ms", ConfigType.INT,
                  lambda c: str(c.group_min_session_timeout_ms),
                  "--group-min-session-timeout-ms."),
    BrokerSetting("group.max.session.timeout.ms", ConfigType.INT,
                  lambda c: str(c.group_max_session_timeout_ms),
                  "--group-max-session-timeout-ms."),
    BrokerSetting("group.initial.rebalance.delay.ms", ConfigType.INT,
                  lambda c: str(c.group_initial_rebalance_delay_ms),
                  "--group-initial-rebalance-delay-ms."),
    BrokerSetting("connection.failed.authentication.delay.ms", ConfigType.INT,
                  lambda c: str(c.failed_auth_close_delay_ms),
                  "--failed-auth-close-delay-ms."),
)
