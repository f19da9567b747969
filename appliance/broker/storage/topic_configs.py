"""Topic and broker configs as Kafka tools see them: one table, each row saying what this
broker does with the setting.

kafka-configs, kafka-ui, AKHQ and the admin clients describe a topic's configs first and
alter them by name; client libraries create topics with configs. A topic config here is
either LIVE (stored with the topic, in force from the next request, retention sweep or
cleaner pass, and the same after a restart), FIXED (this broker has exactly one
behaviour: one replica, the producer's timestamps, no tiered storage; only that value is
accepted, anything else refused with the reason) or INERT (any valid value is accepted
and stored, with no effect here: every Kafka 4.x topic config this broker has no use
for, each saying why). Values are checked as Kafka's ConfigDef checks them, and refused
in its words ("Invalid value x for configuration y: Not a number of type LONG"). A name
that is not in the table is refused too, as Kafka refuses unknown topic configs.

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


class TopicConfigError(ValueError):
    """A topic config name or value this broker refuses (INVALID_CONFIG); the message says
    why. Named apart from ``appliance.config.ConfigError`` (the appliance's own settings)."""


INT32_MAX = (1 << 31) - 1
INT32_MIN = -(1 << 31)
LONG_MAX = (1 << 63) - 1
LONG_MIN = -(1 << 63)

# Kafka's own wording (its ConfigDef), so a tool's error reads as Kafka's would:
# "Invalid value soon for configuration retention.ms: Not a number of type LONG".


def _number(kind: ConfigType, minimum: int | None = None,
            maximum: int | None = None) -> Callable[[str], None]:
    """An INT or LONG config, in ``minimum..maximum``."""
    low, high = (INT32_MIN, INT32_MAX) if kind is ConfigType.INT else (LONG_MIN, LONG_MAX)

    def check(value: str) -> None:
        try:
            n = int(value.strip())
        except ValueError:
            raise TopicConfigError(f"Not a number of type {kind.name}") from None
        if not low <= n <= high:
            raise TopicConfigError(f"Not a number of type {kind.name}")
        if minimum is not None and n < minimum:
            raise TopicConfigError(f"Value must be at least {minimum}")
        if maximum is not None and n > maximum:
            raise TopicConfigError(f"Value must be no more than {maximum}")
    return check


def _integer(minimum: int, maximum: int = INT32_MAX) -> Callable[[str], None]:
    return _number(ConfigType.INT, minimum, maximum)


def _long(minimum: int | None = None) -> Callable[[str], None]:
    return _number(ConfigType.LONG, minimum)


def _level(low: int, high: int, unset: int | None = None) -> Callable[[str], None]:
    """A codec's compression level: ``low..high``, or the codec's default (``unset``)."""
    def check(value: str) -> None:
        _number(ConfigType.INT)(value)
        n = int(value.strip())
        if not (low <= n <= high or n == unset):
            extra = f" or {unset}" if unset is not None else ""
            raise TopicConfigError(f"Value must be between {low} and {high}{extra}")
    return check


def _ratio(value: str) -> None:
    try:
        x = float(value)
    except ValueError:
        raise TopicConfigError("Not a number of type DOUBLE") from None
    if x < 0:
        raise TopicConfigError("Value must be at least 0")
    if x > 1:
        raise TopicConfigError("Value must be no more than 1")


def _boolean(value: str) -> None:
    if value.strip().lower() not in ("true", "false"):
        raise TopicConfigError("Expected value to be either true or false")


def _one_of(values: tuple[str, ...]) -> Callable[[str], None]:
    def check(value: str) -> None:
        v = value.strip().lower()
        if v not in values:
            raise TopicConfigError(f"String must be one of: {', '.join(values)}")
    return check


def _cleanup_policy(value: str) -> None:
    items = [v.strip().lower() for v in value.split(",") if v.strip()]
    bad = [v for v in items if v not in CLEANUP_POLICIES]
    if bad or not items:
        raise TopicConfigError(f"String must be one of: {', '.join(CLEANUP_POLICIES)}")


def _throttled_replicas(value: str) -> None:
    """Kafka's throttled-replica list: empty, ``*``, or ``partition:broker,...``."""
    v = value.strip()
    if v in ("", "*"):
        return
    for item in v.split(","):
        part, sep, broker = item.strip().partition(":")
        if not (sep and part.strip().isdigit() and broker.strip().isdigit()):
            raise TopicConfigError("must be the literal '*' or a list of replicas in the "
                              "following format: [partitionId]:[brokerId],[partitionId]:"
                              "[brokerId],...")


CLEANUP_POLICIES = ("compact", "delete")




class Kind(enum.Enum):
    LIVE = "live"  # in force: stored, applied
    FIXED = "fixed"  # one behaviour: only that value
    INERT = "inert"  # accepted and stored, no effect here (docs/broker.md says why)


@dataclass(frozen=True)
class TopicConfig:
    name: str
    type: ConfigType
    broker_synonym: str  # the broker-wide setting it defaults to, Kafka's name ("": none)
    doc: str
    broker_value: Callable[[BrokerConfig], str] | None = None  # the broker's default
    broker_flag_set: Callable[[BrokerConfig], bool] | None = None  # set by a flag
    check: Callable[[str], None] | None = None  # LIVE, INERT: raises TopicConfigError
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
            raise TopicConfigError(f"{self.name}: a value is required")
        if self.fixed is not None:
            if value.strip().lower() != self.fixed.lower():
                raise TopicConfigError(f"{self.name}: only {self.fixed!r} is supported "
                                  f"({self.why_fixed}), got {value!r}")
            return self.fixed
        assert self.check is not None
        try:
            self.check(value)
        except TopicConfigError as exc:
            raise TopicConfigError(f"Invalid value {value} for configuration {self.name}: "
                              f"{exc}") from None
        return value.strip()

    def default(self, config: BrokerConfig) -> str:
        if self.fixed is not None:
            return self.fixed
        if self.broker_value is None:  # a table entry with neither: a defect of the table
            raise TopicConfigError(f"{self.name}: no fixed value and no broker default")
        return self.broker_value(config)

    def default_source(self, config: BrokerConfig) -> ConfigSource:
        if self.broker_flag_set is not None and self.broker_flag_set(config):
            return ConfigSource.STATIC_BROKER_CONFIG
        return ConfigSource.DEFAULT_CONFIG


def _or_unlimited(v: int | None) -> str:
    return "-1" if v is None else str(v)


def _const(value: str) -> Callable[[BrokerConfig], str]:
    return lambda _c: value


_NO_EFFECT_FLUSH = ("No effect here: when acknowledged data is synced is the broker's "
                    "--flush policy (write, fsync, interval), for every topic.")
_NO_TIERED = "No effect here: this broker has no tiered storage (remote.storage.enable)."
_NO_REPLICAS = "No effect here: one broker, one replica, nothing to replicate or throttle."
_LEVEL = ("No effect here: the broker recompresses (compression.type) at the codec's "
          "default level.")

TOPIC_CONFIGS: tuple[TopicConfig, ...] = (
    TopicConfig("retention.ms", ConfigType.LONG, "log.retention.ms",
                "Segments (in memory: batches) whose newest batch was appended longer ago "
                "than this are deleted (-1: kept by age forever).",
                broker_value=lambda c: _or_unlimited(c.retention_ms),
                broker_flag_set=lambda c: c.retention_ms_set, check=_long(-1)),
    TopicConfig("retention.bytes", ConfigType.LONG, "log.retention.bytes",
                "Per partition: the oldest segments (in memory: batches) are deleted while "
                "the partition would still hold this much without them (-1: no limit).",
                broker_value=lambda c: _or_unlimited(c.retention_bytes),
                broker_flag_set=lambda c: c.retention_bytes is not None, check=_long()),
    TopicConfig("max.message.bytes", ConfigType.INT, "message.max.bytes",
                "The largest record batch a produce may append.",
                broker_value=lambda c: str(c.max_message_bytes),
                broker_flag_set=lambda c: c.max_message_bytes != DEFAULT_MAX_MESSAGE_BYTES,
                check=_integer(0)),
    TopicConfig("segment.bytes", ConfigType.INT, "log.segment.bytes",
                "With --data-dir: a partition starts a new segment file after this many "
                "bytes (retention deletes whole segment files).",
                broker_value=lambda c: str(c.segment_bytes),
                broker_flag_set=lambda c: c.segment_bytes != DEFAULT_SEGMENT_BYTES,
                check=_integer(14)),
    TopicConfig("segment.ms", ConfigType.LONG, "log.roll.ms",
                "With --data-dir: a partition starts a new segment once its active one "
                "is this old, so time retention can delete it.",
                broker_value=lambda c: str(c.segment_ms),
                broker_flag_set=lambda c: c.segment_ms != DEFAULT_SEGMENT_MS,
                check=_long(1)),
    TopicConfig("segment.jitter.ms", ConfigType.LONG, "log.roll.jitter.ms",
                "With --data-dir: up to this much is taken off segment.ms at random per "
                "segment, so partitions do not all roll at once.",
                broker_value=_const("0"), check=_long(0)),
    TopicConfig("segment.index.bytes", ConfigType.INT, "log.index.size.max.bytes",
                "With --data-dir: a segment rolls when its index file reaches this size.",
                broker_value=_const(str(DEFAULT_SEGMENT_INDEX_BYTES)), check=_integer(4)),
    TopicConfig("index.interval.bytes", ConfigType.INT, "log.index.interval.bytes",
                "With --data-dir: an index entry every this many bytes of log.",
                broker_value=_const(str(DEFAULT_INDEX_INTERVAL_BYTES)), check=_integer(0)),
    TopicConfig("compression.type", ConfigType.STRING, "compression.type",
                "producer: batches are stored as the producer compressed them; uncompressed, "
                "gzip, snappy, lz4, zstd: the broker rewrites batches in another codec.",
                broker_value=_const("producer"), check=_one_of(COMPRESSION_TYPES)),
    TopicConfig("cleanup.policy", ConfigType.LIST, "log.cleanup.policy",
                "delete: old segments are deleted by retention (retention.ms, "
                "retention.bytes); compact: the log cleaner keeps each key's newest "
                "record (with --data-dir); compact,delete: both.",
                broker_value=_const("delete"), check=_cleanup_policy),
    TopicConfig("min.insync.replicas", ConfigType.INT, "min.insync.replicas",
                "A single broker holds the single replica.", fixed="1",
                why_fixed="single-broker cluster: acks=all waits for the one replica"),
    TopicConfig("message.timestamp.type", ConfigType.STRING, "log.message.timestamp.type",
                "Records keep the producer's timestamps.", fixed="CreateTime",
                why_fixed="LogAppendTime is not implemented: batches are stored unchanged"),
    TopicConfig("delete.retention.ms", ConfigType.LONG, "log.cleaner.delete.retention.ms",
                "Compacted topics: a tombstone (null value) is removed by the cleaner once "
                "its segment was last appended to longer ago than this.",
                broker_value=_const("86400000"), check=_long(0)),
    TopicConfig("min.compaction.lag.ms", ConfigType.LONG, "log.cleaner.min.compaction.lag.ms",
                "Compacted topics: a segment is cleaned only once its newest record is "
                "this old.", broker_value=_const("0"), check=_long(0)),
    TopicConfig("max.compaction.lag.ms", ConfigType.LONG, "log.cleaner.max.compaction.lag.ms",
                "Compacted topics: a closed segment this old is cleaned whatever the dirty "
                "ratio.", broker_value=_const(str(LONG_MAX)), check=_long(1)),
    TopicConfig("min.cleanable.dirty.ratio", ConfigType.DOUBLE,
                "log.cleaner.min.cleanable.ratio",
                "Compacted topics: cleaned when the not-yet-cleaned share of the closed "
                "segments' bytes reaches this.", broker_value=_const("0.5"), check=_ratio),
    TopicConfig("file.delete.delay.ms", ConfigType.LONG, "log.segment.delete.delay.ms",
                "No effect here: a segment retention takes is deleted at once (readers "
                "still holding it keep their open file).",
                broker_value=_const("60000"), check=_long(0), inert=True),
    TopicConfig("flush.messages", ConfigType.LONG, "log.flush.interval.messages",
                _NO_EFFECT_FLUSH, broker_value=_const(str(LONG_MAX)), check=_long(1),
                inert=True),
    TopicConfig("flush.ms", ConfigType.LONG, "log.flush.interval.ms", _NO_EFFECT_FLUSH,
                broker_value=_const(str(LONG_MAX)), check=_long(0), inert=True),
    TopicConfig("preallocate", ConfigType.BOOLEAN, "log.preallocate",
                "No effect here: segment files grow as they are written.",
                broker_value=_const("false"), check=_boolean, inert=True),
    TopicConfig("compression.gzip.level", ConfigType.INT, "compression.gzip.level", _LEVEL,
                broker_value=_const("-1"), check=_level(1, 9, -1), inert=True),
    TopicConfig("compression.lz4.level", ConfigType.INT, "compression.lz4.level", _LEVEL,
                broker_value=_const("9"), check=_level(1, 17), inert=True),
    TopicConfig("compression.zstd.level", ConfigType.INT, "compression.zstd.level", _LEVEL,
                broker_value=_const("3"), check=_level(-131072, 22), inert=True),
    TopicConfig("message.timestamp.before.max.ms", ConfigType.LONG,
                "log.message.timestamp.before.max.ms",
                "No effect here: records are accepted whatever their timestamp.",
                broker_value=_const(str(LONG_MAX)), check=_long(0), inert=True),
    TopicConfig("message.timestamp.after.max.ms", ConfigType.LONG,
                "log.message.timestamp.after.max.ms",
                "No effect here: records are accepted whatever their timestamp (Kafka 4 "
                "refuses those more than an hour ahead).",
                broker_value=_const("3600000"), check=_long(0), inert=True),
    TopicConfig("unclean.leader.election.enable", ConfigType.BOOLEAN,
                "unclean.leader.election.enable", _NO_REPLICAS,
                broker_value=_const("false"), check=_boolean, inert=True),
    TopicConfig("leader.replication.throttled.replicas", ConfigType.LIST, "", _NO_REPLICAS,
                broker_value=_const(""), check=_throttled_replicas, inert=True),
    TopicConfig("follower.replication.throttled.replicas", ConfigType.LIST, "", _NO_REPLICAS,
                broker_value=_const(""), check=_throttled_replicas, inert=True),
    TopicConfig("remote.storage.enable", ConfigType.BOOLEAN, "",
                "Tiered storage (KIP-405).", fixed="false",
                why_fixed="Tiered Storage functionality is disabled in the broker"),
    TopicConfig("local.retention.ms", ConfigType.LONG, "log.local.retention.ms", _NO_TIERED,
                broker_value=_const("-2"), check=_long(-2), inert=True),
    TopicConfig("local.retention.bytes", ConfigType.LONG, "log.local.retention.bytes",
                _NO_TIERED, broker_value=_const("-2"), check=_long(-2), inert=True),
    TopicConfig("remote.log.copy.disable", ConfigType.BOOLEAN, "", _NO_TIERED,
                broker_value=_const("false"), check=_boolean, inert=True),
    TopicConfig("remote.log.delete.on.disable", ConfigType.BOOLEAN, "", _NO_TIERED,
                broker_value=_const("false"), check=_boolean, inert=True),
)
# Topic configs Kafka 4.0 removed (KIP-724, KIP-937): refused with the reason.
REMOVED_IN_KAFKA_4 = ("message.format.version", "message.downconversion.enable",
                      "message.timestamp.difference.max.ms")
BY_NAME = {c.name: c for c in TOPIC_CONFIGS}


def spec(name: str) -> TopicConfig:
    found = BY_NAME.get(name)
    if found is None:
        why = (" (removed in Kafka 4.0)" if name in REMOVED_IN_KAFKA_4 else "")
        raise TopicConfigError(f"Unknown topic config name: {name}{why}")
    return found


def validate(configs: Mapping[str, str | None]) -> dict[str, str]:
    """The configs a topic stores; raises TopicConfigError for an unknown name or a bad value.

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
    static: bool = False  # what a Kafka 4 node's server.properties always sets

    def source(self, facts: BrokerFacts) -> ConfigSource:
        """Set by a flag (differs from a broker started without flags), or the default;
        the settings every KRaft node must be given (listeners, node.id, ...) are
        STATIC_BROKER_CONFIG, as Kafka 4 describes them."""
        if self.static:
            return ConfigSource.STATIC_BROKER_CONFIG
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
    BrokerSetting("node.id", _I, lambda f: str(f.config.node_id), "This broker's id.",
                  static=True),
    _setting("broker.id", _I, lambda c: c.node_id, "Same as node.id."),
    BrokerSetting("process.roles", _LIST, lambda f: "broker,controller",
                  "One node: the broker is also the controller.", static=True),
    BrokerSetting("listeners", _LIST, _listener, "The one listener (--host, --port, "
                  "--security-protocol).", static=True),
    BrokerSetting("advertised.listeners", _LIST, _listener,
                  "What clients are told to connect to.", static=True),
    BrokerSetting("listener.security.protocol.map", _LIST,
                  lambda f: f"{f.config.security_protocol}:{f.config.security_protocol}",
                  "The listener's name is its protocol.", static=True),
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
    _setting("log.cleanup.policy", _LIST, lambda c: "delete",
             "Topics are deleted by retention unless their cleanup.policy says compact."),
    _setting("log.cleaner.dedupe.buffer.size", _L, lambda c: c.log_cleaner_dedupe_buffer_bytes,
             "--log-cleaner-dedupe-buffer-size: the cleaner's key map."),
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
    _setting("group.consumer.session.timeout.ms", _I,
             lambda c: c.group_consumer_session_timeout_ms,
             "--group-consumer-session-timeout-ms."),
    _setting("group.consumer.heartbeat.interval.ms", _I,
             lambda c: c.group_consumer_heartbeat_interval_ms,
             "--group-consumer-heartbeat-interval-ms."),
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


def _default_of(topic_config: TopicConfig) -> Callable[[BrokerFacts], str | None]:
    """The broker-wide default of ``topic_config``, read from the running broker."""
    return lambda facts: topic_config.default(facts.config)


def _topic_defaults() -> tuple[BrokerSetting, ...]:
    """The broker-level synonym of every topic config not listed above: its default."""
    listed = {b.name for b in BROKER_SETTINGS}
    out = []
    for t in TOPIC_CONFIGS:
        if t.broker_synonym and t.broker_synonym not in listed:
            listed.add(t.broker_synonym)
            out.append(BrokerSetting(t.broker_synonym, t.type, _default_of(t),
                                     f"The default of topic config {t.name}. {t.doc}"))
    return tuple(out)


BROKER_SETTINGS += _topic_defaults()
