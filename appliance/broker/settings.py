"""The broker's settings: one dataclass, filled from the command line or EmbeddedBroker."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from enum import StrEnum

DATA_DIR_USERS = "users.toml"  # the users file of a broker started without --sasl-users
DEFAULT_MAX_MESSAGE_BYTES = 1_048_588  # Kafka's default max.message.bytes
DEFAULT_DEDUPE_BUFFER_BYTES = 32 * 1024 * 1024
DEFAULT_MAX_FRAME_BYTES = 104_857_600  # Kafka's socket.request.max.bytes
DAY_MS = 86_400_000
DEFAULT_RETENTION_MS = 7 * DAY_MS  # Kafka's log.retention.hours=168
DEFAULT_SEGMENT_BYTES = 64 * 1024 * 1024
DEFAULT_SEGMENT_MS = 7 * DAY_MS  # Kafka's log.roll.hours=168
DEFAULT_SEGMENT_INDEX_BYTES = 10 * 1024 * 1024  # Kafka's log.index.size.max.bytes
DEFAULT_INDEX_INTERVAL_BYTES = 4096  # Kafka's log.index.interval.bytes
DEFAULT_FETCH_MAX_BYTES = 57_671_680  # Kafka's fetch.max.bytes (55 MiB)
# What one batch may decompress to, when the broker decompresses it (ListOffsets by
# timestamp, a topic's compression.type): 16 times the default max.message.bytes.
DEFAULT_MAX_DECOMPRESSED_BYTES = 16 * 1024 * 1024
DEFAULT_CONNECTIONS_MAX_IDLE_MS = 600_000  # Kafka's connections.max.idle.ms
# Kafka's max.connections is unlimited; here every connection costs memory (see
# docs/broker.md, "Memory"), so there is a cap, above the per-IP one.
DEFAULT_MAX_CONNECTIONS = 4096
# Kafka's queued.max.request.bytes (unlimited there): request bytes buffered across all
# connections; past it the broker stops reading until requests are done.
DEFAULT_QUEUED_MAX_REQUEST_BYTES = 256 * 1024 * 1024
DEFAULT_OFFSETS_RETENTION_MS = 7 * DAY_MS  # Kafka's offsets.retention.minutes=10080
DEFAULT_MAX_GROUPS = 10_000
DEFAULT_GROUP_MAX_SIZE = 1000  # members per group (Kafka's group.max.size)
# The members' metadata and assignments of one group: Kafka stores a group as one record
# of the offsets topic, so it cannot exceed that topic's max message size.
DEFAULT_GROUP_MAX_METADATA_BYTES = DEFAULT_MAX_MESSAGE_BYTES
# ... and of every group together: what groups may cost the broker's memory.
DEFAULT_GROUPS_MAX_METADATA_BYTES = 64 * 1024 * 1024
# Kafka has no such limit; this broker keeps every partition's batches in memory and
# makes a directory per partition (one fsync each with --data-dir), so a topic of 100,000
# partitions asked by one client would stall every other client while it is created.
DEFAULT_MAX_PARTITIONS_PER_TOPIC = 1000
# Kafka's max.connections.per.ip defaults to unlimited; the appliance's own clients (Spark
# executors, the load generator) open tens from one host, a runaway loop thousands.
DEFAULT_MAX_CONNECTIONS_PER_IP = 1000


class Flush(StrEnum):
    """When an acknowledged batch is on stable storage (docs/broker.md, "Durability").

    Topic metadata and the retention checkpoint are fsynced (file and directory entry)
    under every policy: they are small and rare, and without them a power cut could leave
    a topic the broker cannot read back at all.
    """

    WRITE = "write"  # write() before the ack: survives kill -9, not a power cut
    FSYNC = "fsync"  # fdatasync, and fsync of new directory entries, before the ack
    INTERVAL = "interval"  # fsync of what changed every flush_interval_ms


FLUSH_POLICIES = tuple(f.value for f in Flush)


class AuthorizerKind(StrEnum):
    """Who may do what (docs/broker.md, "ACLs")."""

    NONE = "none"  # everything allowed; the ACL APIs answer SECURITY_DISABLED
    ACL = "acl"  # Kafka's ACL authorizer: deny unless a binding allows (or a super user)


AUTHORIZERS = tuple(k.value for k in AuthorizerKind)


class BudgetPolicy(StrEnum):
    """What the log budget (``--retention-total-bytes``) may take when it is full
    (docs/broker.md, "Retention")."""

    # only what every consumer group with a committed offset on the partition has read;
    # when nothing such is left, produce is refused (KAFKA_STORAGE_ERROR, retriable)
    PROTECT_UNREAD = "protect-unread"
    # the oldest data, read or not (read data first): producers are never refused
    KEEP_NEWEST = "keep-newest"


BUDGET_POLICIES = tuple(p.value for p in BudgetPolicy)


@dataclass
class BrokerConfig:
    host: str = "127.0.0.1"
    port: int = 9092
    node_id: int = 0
    cluster_id: str = "appliance-embedded"
    data_dir: str | None = None
    flush: Flush = Flush.WRITE
    flush_interval_ms: int = 1000  # for Flush.INTERVAL
    segment_bytes: int = DEFAULT_SEGMENT_BYTES
    segment_ms: int = DEFAULT_SEGMENT_MS
    retention_bytes: int | None = None  # per partition (None: no limit)
    retention_ms: int | None = DEFAULT_RETENTION_MS  # None: kept by age forever
    # Every partition together (storage/log_budget.py): None sizes it at start, to the
    # disk with data_dir, else to the host's memory.
    retention_total_bytes: int | None = None
    retention_total_policy: BudgetPolicy = BudgetPolicy.PROTECT_UNREAD
    # The log cleaner's key map (Kafka's log.cleaner.dedupe.buffer.size): what one
    # compaction pass may hold of keys (storage/cleaner.py).
    log_cleaner_dedupe_buffer_bytes: int = DEFAULT_DEDUPE_BUFFER_BYTES
    retention_check_ms: int = 1000
    # Read every segment through at start (as before indexes), quarantining bad bytes:
    # for an operator who suspects damage below the recovery point.
    full_recovery: bool = False
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES
    fetch_max_bytes: int = DEFAULT_FETCH_MAX_BYTES
    producer_id_expiration_ms: int = DAY_MS  # Kafka's producer.id.expiration.ms
    max_producers_per_partition: int = 1000
    connections_max_idle_ms: int = DEFAULT_CONNECTIONS_MAX_IDLE_MS  # 0: never
    max_connections: int = DEFAULT_MAX_CONNECTIONS  # 0: only the open-files limit
    queued_max_request_bytes: int = DEFAULT_QUEUED_MAX_REQUEST_BYTES
    # Requests handled at once per connection: 1 is Kafka's rule (the next request is
    # read once the previous response is sent); 0 (no limit) exists for the bench only.
    max_in_flight_requests: int = 1
    verify_produce_crc: bool = True  # False exists for the bench only
    auto_create_topics: bool = False
    default_partitions: int = 1
    max_partitions_per_topic: int = DEFAULT_MAX_PARTITIONS_PER_TOPIC
    max_connections_per_ip: int = DEFAULT_MAX_CONNECTIONS_PER_IP  # 0: no cap
    # New connections a second per client IP (Kafka's connection_creation_rate IP quota,
    # unlimited by default there as here; connections/rate.py). 0: no limit.
    max_connection_creation_rate_per_ip: float = 0.0
    # Processes that check SASL/PLAIN passwords (PBKDF2, milliseconds each) so a login
    # flood never runs them on the event loop every client shares (security/password_pool.py).
    password_check_workers: int = 1
    initial_topics: dict[str, int] = field(default_factory=dict)
    # The listener's security (see listener.py): paths only, never secrets themselves.
    security_protocol: str = "PLAINTEXT"  # PLAINTEXT | SSL | SASL_PLAINTEXT | SASL_SSL
    ssl_certfile: str | None = None  # PEM certificate chain (SSL, SASL_SSL)
    ssl_keyfile: str | None = None  # PEM private key, mode 0600 (default: in ssl_certfile)
    ssl_client_ca: str | None = None  # require client certificates signed by this CA
    sasl_users_file: str | None = None  # users.toml, mode 0600 (credentials.py)
    sasl_mechanisms: tuple[str, ...] | None = None  # None: the protocol's defaults
    auth_timeout_ms: int = 60_000  # TLS, then SASL, must each finish within this, or the
    # connection is closed
    # Kafka's connection.failed.authentication.delay.ms: after answering a failed
    # authentication, wait this long before closing. It slows password guessing, and real
    # clients need it: kafka-python drops bytes that arrive together with the close, so
    # an immediate close hid the error answer from it on a busy machine.
    failed_auth_close_delay_ms: int = 100
    # The group coordinator (groups/coordinator.py), with Kafka's defaults and names:
    # group.min/max.session.timeout.ms bound what a member may ask for, and
    # group.initial.rebalance.delay.ms lets the members of a new group arrive together.
    group_min_session_timeout_ms: int = 6_000
    group_max_session_timeout_ms: int = 1_800_000
    group_initial_rebalance_delay_ms: int = 3_000
    # KIP-848 consumer groups (groups/consumer_groups.py): the broker decides a member's
    # session and how often it heartbeats (group.consumer.session.timeout.ms and
    # group.consumer.heartbeat.interval.ms, Kafka's defaults).
    group_consumer_session_timeout_ms: int = 45_000
    group_consumer_heartbeat_interval_ms: int = 5_000
    offsets_retention_ms: int = DEFAULT_OFFSETS_RETENTION_MS
    offsets_retention_check_ms: int = 60_000
    max_groups: int = DEFAULT_MAX_GROUPS
    group_max_size: int = DEFAULT_GROUP_MAX_SIZE
    group_max_metadata_bytes: int = DEFAULT_GROUP_MAX_METADATA_BYTES
    groups_max_metadata_bytes: int = DEFAULT_GROUPS_MAX_METADATA_BYTES
    # Authorization (acl/): "none" allows everything; "acl" denies what no ACL binding in
    # DATA_DIR/acls.json allows, except to the super users (principals, e.g. "User:admin").
    authorizer: AuthorizerKind = AuthorizerKind.NONE
    super_users: tuple[str, ...] = ()
    # The metrics endpoint (--metrics-port): label topics and groups by name, or only
    # count them (a scrape anyone on its network can read then names nothing).
    metrics_names: bool = True

    @property
    def users_path(self) -> str | None:
        """The SCRAM users file: --sasl-users, else the data directory's
        (``DATA_DIR/users.toml``, which the admin API creates); None: neither."""
        if self.sasl_users_file is not None:
            return self.sasl_users_file
        return os.path.join(self.data_dir, DATA_DIR_USERS) if self.data_dir else None

    @property
    def retention_ms_set(self) -> bool:
        """Set by a flag, not Kafka's 7-day default."""
        return self.retention_ms != DEFAULT_RETENTION_MS


def parse_topics(spec: str) -> dict[str, int]:
    """``"events:2,alerts:1"`` -> ``{"events": 2, "alerts": 1}`` (partitions default 1)."""
    out: dict[str, int] = {}
    for item in filter(None, (s.strip() for s in spec.split(","))):
        name, _, count = item.partition(":")
        n = int(count) if count else 1
        if not name or n < 1:
            raise ValueError(f"bad topic spec {item!r}: want NAME[:PARTITIONS>=1]")
        out[name] = n
    return out
