"""Topic and broker configs as Kafka tools see them: one table, each row saying what this
broker does with the setting.

kafka-configs, kafka-ui, AKHQ and the admin clients describe a topic's configs first and
alter them by name; client libraries create topics with configs. A topic config here is
either LIVE (stored with the topic, in force from the next request or retention sweep,
and the same after a restart), FIXED (this broker has exactly one behaviour: one
replica, the producer's timestamps; only that value is accepted) or INERT (Kafka applies
it only to compacted topics, and there are none here: any valid value is accepted and
stored, with no effect, as Kafka's delete-policy topics ignore it). What this broker
cannot do is refused with the reason, naming the missing feature (``cleanup.policy=
compact``: log compaction), instead of being stored and silently ignored. A name that is
not in the table is refused too, as Kafka refuses unknown topic configs.

Broker configs are read-only: they come from ``appliance broker``'s flags.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

from appliance.broker.settings import (
    DEFAULT_INDEX_INTERVAL_BYTES,
    DEFAULT_MAX_MESSAGE_BYTES,
    DEFAULT_SEGMENT_BYTES,
    DEFAULT_SEGMENT_INDEX_BYTES,
    DEFAULT_SEGMENT_MS,
    BrokerConfig,
)

# compression.type: Kafka's values; "producer" keeps what the producer chose
COMPRESSION_TYPES = ("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd")


class ConfigType(enum.IntEnum):
    """DescribeConfigs v3+ ``config_type``."""

    BOOLEAN = 1
    STRING = 2
    INT = 3
    LONG = 5
    DOUBLE = 6
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


def _integer(minimum: int, maximum: int = (1 << 63) - 1) -> Callable[[str], None]:
    def check(value: str) -> None:
        try:
            n = int(value)
        except ValueError:
            raise ConfigError(f"must be an integer >= {minimum}, got {value!r}") from None
        if not minimum <= n <= maximum:
            bound = f">= {minimum}" if maximum == (1 << 63) - 1 else f"in {minimum}..{maximum}"
            raise ConfigError(f"must be an integer {bound}, got {n}")
    return check


def _ratio(value: str) -> None:
    try:
        x = float(value)
    except ValueError:
        raise ConfigError(f"must be a number in 0..1, got {value!r}") from None
    if not 0 <= x <= 1:
        raise ConfigError(f"must be a number in 0..1, got {value}")


def _one_of(values: tuple[str, ...]) -> Callable[[str], None]:
    def check(value: str) -> None:
        v = value.strip().lower()
        if v not in values:
            raise ConfigError(f"must be one of {', '.join(values)}, got {value!r}")
    return check


INT32_MAX = (1 << 31) - 1


class Kind(enum.Enum):
    LIVE = "live"  # in force: stored, applied
    FIXED = "fixed"  # one behaviour: only that value
    INERT = "inert"  # Kafka uses it only for compacted topics: accepted, no effect


@dataclass(frozen=True)
class TopicConfig:
    name: str
    type: ConfigType
    broker_synonym: str  # the broker-wide setting it defaults to, Kafka's name
    doc: str
    broker_value: Callable[[BrokerConfig], str] | None = None  # the broker's default
    broker_flag_set: Callable[[BrokerConfig], bool] | None = None  # set by a flag
    check: Callable[[str], None] | None = None  # LIVE, INERT: raises ConfigError
    fixed: str | None = None  # FIXED: the only value accepted
    why_fixed: str = ""
    inert: bool = False

    @property
    def kind(self) -> Kind:
        return Kind.FIXED if self.fixed is not None else (Kind.INERT if self.inert
                                                          else Kind.LIVE)

    @property
    def live(self) -> bool:
        """Stored with the topic (LIVE and INERT: a tool reads back what it set)."""
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


NO_COMPACTION = ("log compaction is not implemented by this broker: use "
                 "cleanup.policy=delete (retention.ms, retention.bytes)")


def _const(value: str) -> Callable[[BrokerConfig], str]:
    return lambda _c: value


TOPIC_CONFIGS: tuple[TopicConfig, ...] = (
    TopicConfig("retention.ms", ConfigType.LONG, "log.retention.ms",
                "Segments (in memory: batches) whose newest batch was appended longer ago "
                "than this are deleted (-1: kept by age forever).",
                broker_value=lambda c: _or_unlimited(c.retention_ms),
                broker_flag_set=lambda c: c.retention_ms_set, check=_integer(-1)),
    TopicConfig("retention.bytes", ConfigType.LONG, "log.retention.bytes",
                "Per partition: the oldest segments (in memory: batches) are deleted while "
                "the partition would still hold this much without them (-1: no limit).",
                broker_value=lambda c: _or_unlimited(c.retention_bytes),
                broker_flag_set=lambda c: c.retention_bytes is not None, check=_integer(-1)),
    TopicConfig("max.message.bytes", ConfigType.INT, "message.max.bytes",
                "The largest record batch a produce may append.",
                broker_value=lambda c: str(c.max_message_bytes),
                broker_flag_set=lambda c: c.max_message_bytes != DEFAULT_MAX_MESSAGE_BYTES,
                check=_integer(0, INT32_MAX)),
    TopicConfig("segment.bytes", ConfigType.INT, "log.segment.bytes",
                "With --data-dir: a partition starts a new segment file after this many "
                "bytes (retention deletes whole segment files).",
                broker_value=lambda c: str(c.segment_bytes),
                broker_flag_set=lambda c: c.segment_bytes != DEFAULT_SEGMENT_BYTES,
                check=_integer(14, INT32_MAX)),
    TopicConfig("segment.ms", ConfigType.LONG, "log.roll.ms",
                "With --data-dir: a partition starts a new segment once its active one "
                "is this old, so time retention can delete it.",
                broker_value=lambda c: str(c.segment_ms),
                broker_flag_set=lambda c: c.segment_ms != DEFAULT_SEGMENT_MS,
                check=_integer(1)),
    TopicConfig("segment.jitter.ms", ConfigType.LONG, "log.roll.jitter.ms",
                "With --data-dir: up to this much is taken off segment.ms at random per "
                "segment, so partitions do not all roll at once.",
                broker_value=_const("0"), check=_integer(0)),
    TopicConfig("segment.index.bytes", ConfigType.INT, "log.index.size.max.bytes",
                "With --data-dir: a segment rolls when its index file reaches this size.",
                broker_value=_const(str(DEFAULT_SEGMENT_INDEX_BYTES)),
                check=_integer(4, INT32_MAX)),
    TopicConfig("index.interval.bytes", ConfigType.INT, "log.index.interval.bytes",
                "With --data-dir: an index entry every this many bytes of log.",
                broker_value=_const(str(DEFAULT_INDEX_INTERVAL_BYTES)),
                check=_integer(0, INT32_MAX)),
    TopicConfig("compression.type", ConfigType.STRING, "compression.type",
                "producer: batches are stored as the producer compressed them; uncompressed, "
                "gzip, snappy, lz4, zstd: the broker rewrites batches in another codec.",
                broker_value=_const("producer"), check=_one_of(COMPRESSION_TYPES)),
    TopicConfig("cleanup.policy", ConfigType.LIST, "log.cleanup.policy",
                "Old segments are deleted by retention.", fixed="delete",
                why_fixed=NO_COMPACTION),
    TopicConfig("min.insync.replicas", ConfigType.INT, "min.insync.replicas",
                "A single broker holds the single replica.", fixed="1",
                why_fixed="single-broker cluster: acks=all waits for the one replica"),
    TopicConfig("message.timestamp.type", ConfigType.STRING, "log.message.timestamp.type",
                "Records keep the producer's timestamps.", fixed="CreateTime",
                why_fixed="LogAppendTime is not implemented: batches are stored unchanged"),
    TopicConfig("delete.retention.ms", ConfigType.LONG, "log.cleaner.delete.retention.ms",
                "Kafka keeps tombstones this long after compacting; no topic is compacted "
                "here.", broker_value=_const("86400000"), check=_integer(0), inert=True),
    TopicConfig("min.compaction.lag.ms", ConfigType.LONG, "log.cleaner.min.compaction.lag.ms",
                "For compacted topics only; none here.", broker_value=_const("0"),
                check=_integer(0), inert=True),
    TopicConfig("max.compaction.lag.ms", ConfigType.LONG, "log.cleaner.max.compaction.lag.ms",
                "For compacted topics only; none here.",
                broker_value=_const(str((1 << 63) - 1)), check=_integer(1), inert=True),
    TopicConfig("min.cleanable.dirty.ratio", ConfigType.DOUBLE,
                "log.cleaner.min.cleanable.ratio", "For compacted topics only; none here.",
                broker_value=_const("0.5"), check=_ratio, inert=True),
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


class BrokerFacts(NamedTuple):
    """What a broker config is read from: the settings and where it listens."""

    config: BrokerConfig
    host: str  # advertised
    port: int


@dataclass(frozen=True)
class BrokerSetting:
    """A read-only broker config: Kafka's name, read from the running broker."""

    name: str
    type: ConfigType
    value: Callable[[BrokerFacts], str | None]
    doc: str

    def source(self, facts: BrokerFacts) -> ConfigSource:
        """Set by a flag (differs from a broker started without flags), or the default."""
        default = facts._replace(config=BrokerConfig())
        return (ConfigSource.DEFAULT_CONFIG if self.value(facts) == self.value(default)
                else ConfigSource.STATIC_BROKER_CONFIG)


def _bool(v: bool) -> str:
    return "true" if v else "false"


def _listener(f: BrokerFacts) -> str:
    return f"{f.config.security_protocol}://{f.host}:{f.port}"


def _setting(name: str, kind: ConfigType, value: Callable[[BrokerConfig], object],
             doc: str) -> BrokerSetting:
    """A setting read from the config alone (most of them)."""
    def read(f: BrokerFacts) -> str | None:
        v = value(f.config)
        return None if v is None else _bool(v) if isinstance(v, bool) else str(v)
    return BrokerSetting(name, kind, read, doc)


_S, _I, _L, _B = ConfigType.STRING, ConfigType.INT, ConfigType.LONG, ConfigType.BOOLEAN
_LIST = ConfigType.LIST

# Kafka's names, what tools ask a broker for (kafka-configs --entity-type brokers, kafka-ui,
# AKHQ, the admin clients' describeConfigs); the value is this broker's behaviour.
BROKER_SETTINGS: tuple[BrokerSetting, ...] = (
    _setting("node.id", _I, lambda c: c.node_id, "This broker's id."),
    _setting("broker.id", _I, lambda c: c.node_id, "Same as node.id."),
    BrokerSetting("process.roles", _LIST, lambda f: "broker,controller",
                  "One node: the broker is also the controller."),
    BrokerSetting("listeners", _LIST, _listener, "The one listener (--host, --port, "
                  "--security-protocol)."),
    BrokerSetting("advertised.listeners", _LIST, _listener,
                  "What clients are told to connect to."),
    BrokerSetting("listener.security.protocol.map", _LIST,
                  lambda f: f"{f.config.security_protocol}:{f.config.security_protocol}",
                  "The listener's name is its protocol."),
    BrokerSetting("inter.broker.listener.name", _S, lambda f: f.config.security_protocol,
                  "No other broker: the one listener."),
    BrokerSetting("security.inter.broker.protocol", _S, lambda f: f.config.security_protocol,
                  "No other broker: the listener's protocol."),
    BrokerSetting("sasl.enabled.mechanisms", _LIST,
                  lambda f: ",".join(f.config.sasl_mechanisms or ()) or None,
                  "--sasl-mechanisms (null: the protocol's defaults, or no SASL)."),
    _setting("broker.rack", _S, lambda c: None, "No racks."),
    _setting("log.dirs", _S, lambda c: c.data_dir, "--data-dir (null: in memory)."),
    _setting("log.retention.ms", _L, lambda c: _or_unlimited(c.retention_ms),
             "--retention-ms: the topics' default retention.ms."),
    _setting("log.retention.hours", _I, lambda c: -1 if c.retention_ms is None
             else c.retention_ms // 3_600_000, "log.retention.ms in hours (rounded down)."),
    _setting("log.retention.bytes", _L, lambda c: _or_unlimited(c.retention_bytes),
             "--retention-bytes: the topics' default retention.bytes."),
    _setting("log.retention.total.bytes", _L, lambda c: _or_unlimited(c.retention_total_bytes),
             "--retention-total-bytes: every partition together, this broker's own (-1: "
             "sized at start)."),
    _setting("log.retention.total.policy", _S, lambda c: c.retention_total_policy.value,
             "--retention-total-policy: what the total budget may evict (protect-unread: "
             "only what every consumer group read, else produce is refused; keep-newest: "
             "the oldest)."),
    _setting("log.retention.check.interval.ms", _L, lambda c: c.retention_check_ms,
             "How often retention runs."),
    _setting("message.max.bytes", _I, lambda c: c.max_message_bytes,
             "--max-message-bytes: the topics' default max.message.bytes."),
    _setting("log.segment.bytes", _I, lambda c: c.segment_bytes,
             "--segment-bytes: the topics' default segment.bytes."),
    _setting("log.roll.ms", _L, lambda c: c.segment_ms,
             "--segment-ms: the topics' default segment.ms."),
    _setting("log.index.interval.bytes", _I, lambda c: DEFAULT_INDEX_INTERVAL_BYTES,
             "An index entry every this many bytes of log."),
    _setting("log.flush.interval.ms", _L, lambda c: c.flush_interval_ms
             if c.flush == "interval" else None, "--flush interval: how often."),
    _setting("log.cleanup.policy", _LIST, lambda c: "delete", "No log compaction."),
    _setting("compression.type", _S, lambda c: "producer",
             "Topics keep the producer's codec unless their compression.type says."),
    _setting("auto.create.topics.enable", _B, lambda c: c.auto_create_topics,
             "--auto-create-topics."),
    _setting("delete.topic.enable", _B, lambda c: True, "Topics may be deleted."),
    _setting("num.partitions", _I, lambda c: c.default_partitions,
             "--default-partitions: partitions of an auto-created topic."),
    _setting("default.replication.factor", _I, lambda c: 1, "A single broker: one replica."),
    _setting("min.insync.replicas", _I, lambda c: 1, "A single broker: one replica."),
    _setting("offsets.topic.replication.factor", _I, lambda c: 1,
             "Committed offsets: one copy (DATA_DIR/consumer_offsets.log)."),
    _setting("transaction.state.log.replication.factor", _I, lambda c: 1,
             "No transactions; one copy if there were."),
    _setting("transaction.state.log.min.isr", _I, lambda c: 1, "No transactions."),
    _setting("unclean.leader.election.enable", _B, lambda c: False, "One replica."),
    _setting("socket.request.max.bytes", _I, lambda c: c.max_frame_bytes,
             "--max-request-bytes: the largest Produce frame."),
    _setting("queued.max.request.bytes", _L, lambda c: c.queued_max_request_bytes,
             "--queued-max-request-bytes."),
    _setting("fetch.max.bytes", _I, lambda c: c.fetch_max_bytes, "--fetch-max-bytes."),
    _setting("connections.max.idle.ms", _L, lambda c: c.connections_max_idle_ms,
             "--connections-max-idle-ms."),
    _setting("max.connections", _I, lambda c: c.max_connections, "--max-connections."),
    _setting("max.connections.per.ip", _I, lambda c: c.max_connections_per_ip,
             "--max-connections-per-ip."),
    _setting("producer.id.expiration.ms", _I, lambda c: c.producer_id_expiration_ms,
             "--producer-id-expiration-ms."),
    _setting("offsets.retention.minutes", _I, lambda c: c.offsets_retention_ms // 60_000,
             "--offsets-retention-minutes."),
    _setting("group.max.size", _I, lambda c: c.group_max_size, "--group-max-size."),
    _setting("group.min.session.timeout.ms", _I, lambda c: c.group_min_session_timeout_ms,
             "--group-min-session-timeout-ms."),
    _setting("group.max.session.timeout.ms", _I, lambda c: c.group_max_session_timeout_ms,
             "--group-max-session-timeout-ms."),
    _setting("group.initial.rebalance.delay.ms", _I,
             lambda c: c.group_initial_rebalance_delay_ms,
             "--group-initial-rebalance-delay-ms."),
    _setting("connection.failed.authentication.delay.ms", _I,
             lambda c: c.failed_auth_close_delay_ms, "--failed-auth-close-delay-ms."),
    _setting("authorizer.class.name", _S, lambda c: "" if c.authorizer == "none"
             else "appliance.broker.acl.Authorizer", "--authorizer (empty: none)."),
    _setting("super.users", _LIST, lambda c: ";".join(c.super_users) or None,
             "--super-users."),
)
