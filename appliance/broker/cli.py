"""``appliance broker``: run the broker in the foreground until SIGTERM/SIGINT."""

from __future__ import annotations

import argparse
import asyncio
import resource
import signal
import sys

from appliance.broker.acl.model import AclError, check_principal
from appliance.broker.acl.store import AclStoreError
from appliance.broker.connections.rate import THROTTLED_CLOSE_S
from appliance.broker.security.listener import PROTOCOLS, ListenerError
from appliance.broker.settings import (
    AUTHORIZERS,
    BUDGET_POLICIES,
    DEFAULT_CONNECTIONS_MAX_IDLE_MS,
    DEFAULT_DEDUPE_BUFFER_BYTES,
    DEFAULT_FETCH_MAX_BYTES,
    DEFAULT_GROUP_MAX_METADATA_BYTES,
    DEFAULT_GROUP_MAX_SIZE,
    DEFAULT_GROUPS_MAX_METADATA_BYTES,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_CONNECTIONS_PER_IP,
    DEFAULT_MAX_DECOMPRESSED_BYTES,
    DEFAULT_MAX_FRAME_BYTES,
    DEFAULT_MAX_GROUPS,
    DEFAULT_MAX_PARTITIONS_PER_TOPIC,
    DEFAULT_OFFSETS_RETENTION_MS,
    DEFAULT_QUEUED_MAX_REQUEST_BYTES,
    DEFAULT_RETENTION_MS,
    DEFAULT_SEGMENT_BYTES,
    DEFAULT_SEGMENT_MS,
    FLUSH_POLICIES,
    AuthorizerKind,
    BrokerConfig,
    BudgetPolicy,
    Flush,
    parse_topics,
)
from appliance.command_tree import count_arg, number_arg, port_arg
from appliance.durations import ms_arg
from appliance.logs import configure, get_logger

READY_PREFIX = "broker ready bootstrap="
METRICS_PREFIX = "broker metrics url="  # printed before the ready line with --metrics-port


def _install_uvloop() -> str:
    try:
        import uvloop
    except ImportError:
        return "asyncio"
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    return "uvloop"


def _topics_arg(value: str) -> dict[str, int]:
    try:
        return parse_topics(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


# The numeric flags: the appliance's own validators (appliance.command_tree), so a bad
# value reads the same on every command (``argument --max-groups: must be a whole number,
# got '20s'``).
_non_negative = count_arg(0)
_non_negative_float = number_arg(0.0)
_minus_one_or_more = count_arg(-1, meaning="-1: no limit")
_positive = count_arg(1)
_port = port_arg()


# The duration flags: any duration (7d, 10m, 250ms), a plain number in the unit of the
# flag's name as before (appliance.durations.ms_arg).
_ms = ms_arg()
_positive_ms = ms_arg(positive=True)
_retention_ms = ms_arg(no_limit="kept by age")
_minutes = ms_arg(bare_unit="m", positive=True, whole=False)
DURATION_HELP = "a duration: 7d, 10m, 250ms; a plain number is"


def add_broker_options(parser: argparse.ArgumentParser) -> None:
    """The flags of ``appliance broker``; the subcommand runs ``run_from_args``."""
    parser.description = (
        "Run the embedded broker in the foreground until SIGTERM or SIGINT (Ctrl-C; exit "
        "0): the project's own single-node Kafka-protocol broker, in memory or durable in "
        "--data-dir. One node, no replication: beyond a single site, use your Kafka "
        "(docs/broker.md). Prints 'broker ready bootstrap=HOST:PORT' when it listens.")
    parser.epilog = (
        "examples:\n"
        "  appliance broker --topics events:2,alerts:1,events.dlq:1\n"
        "  appliance broker --data-dir var/broker --metrics-port 9465\n"
        "  appliance broker --port 0 --auto-create-topics")
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to listen on (and serve --metrics-port on)")
    parser.add_argument("--port", type=_port, default=9092, help="0: any free port")
    parser.add_argument("--data-dir", default=None, help="durable storage (default: memory)")
    parser.add_argument("--topics", type=_topics_arg, default={},
                        help="create at start, e.g. events:2,alerts:1")
    parser.add_argument("--auto-create-topics", action="store_true",
                        help="create unknown topics on Metadata/Produce (default: refuse)")
    parser.add_argument("--default-partitions", type=_non_negative, default=1,
                        help="partitions of a topic created without a count")
    ret = parser.add_argument_group(
        "retention", "how much the log keeps (Kafka's settings and defaults, docs/broker.md "
                     "\"Retention\"); topics may set retention.ms/retention.bytes")
    ret.add_argument("--retention-ms", type=_retention_ms,
                     metavar="DURATION", default=DEFAULT_RETENTION_MS,
                     help="segments (in memory: batches) appended longer ago go (Kafka's "
                          "log.retention.ms; default 7d; -1: kept by age; "
                          f"{DURATION_HELP} ms)")
    ret.add_argument("--retention-bytes", type=_minus_one_or_more, default=-1,
                     help="per partition: the oldest segments go while it would still hold "
                          "this much without them (log.retention.bytes; default -1: none)")
    ret.add_argument("--retention-total-bytes", type=_non_negative, default=None,
                     help="every partition together: past it the oldest data goes first "
                          "(default: with --data-dir 80%% of the space the log may use at "
                          "start, its own and the free; in memory 1/8 of RAM, at most 1 GiB)")
    ret.add_argument("--retention-total-policy", choices=BUDGET_POLICIES,
                     default="protect-unread",
                     help="when --retention-total-bytes is reached: protect-unread (default) "
                          "evicts only what every consumer group has read and else refuses "
                          "produce (retriable KAFKA_STORAGE_ERROR); keep-newest evicts the "
                          "oldest data, read or not")
    ret.add_argument("--log-cleaner-dedupe-buffer-size", type=_non_negative,
                     default=DEFAULT_DEDUPE_BUFFER_BYTES,
                     help="compacted topics: bytes of keys one cleaning pass may hold "
                          "(Kafka's log.cleaner.dedupe.buffer.size; default 32 MiB)")
    parser.add_argument("--max-message-bytes", type=_non_negative, default=None,
                        help="largest accepted record batch (default 1048588)")
    parser.add_argument("--flush", choices=FLUSH_POLICIES, default="write",
                        help="write: write() before the ack (survives kill -9, not a power "
                             "cut); fsync: data and new directory entries synced before the "
                             "ack; interval: synced every --flush-interval-ms (docs/broker.md)")
    parser.add_argument("--full-recovery", action="store_true",
                        help="read every segment through at start, quarantining bytes that "
                             "are not valid batches (default: only what a crash may have "
                             "left unsynced; the rest is taken from its index)")
    parser.add_argument("--flush-interval-ms", type=_ms, metavar="DURATION", default=1000,
                        help=f"with --flush interval: how often to sync (default 1s; "
                             f"{DURATION_HELP} ms)")
    parser.add_argument("--segment-bytes", type=_non_negative, default=DEFAULT_SEGMENT_BYTES,
                        help="a partition's segment file rolls at this size (default 64 MiB)")
    parser.add_argument("--segment-ms", type=_positive_ms,
                        metavar="DURATION", default=DEFAULT_SEGMENT_MS,
                        help="... or once it is this old, so time retention can delete it "
                             f"(Kafka's log.roll.ms; default 7d; {DURATION_HELP} ms)")
    parser.add_argument("--max-partitions-per-topic", type=_positive,
                        default=DEFAULT_MAX_PARTITIONS_PER_TOPIC,
                        help="CreateTopics/CreatePartitions above this are refused with "
                             f"POLICY_VIOLATION (default {DEFAULT_MAX_PARTITIONS_PER_TOPIC})")
    parser.add_argument("--max-connections-per-ip", type=_non_negative,
                        default=DEFAULT_MAX_CONNECTIONS_PER_IP,
                        help="close a client IP's connections beyond this many at once, "
                             f"before TLS or SASL (default {DEFAULT_MAX_CONNECTIONS_PER_IP}; "
                             "0: no cap)")
    parser.add_argument("--max-connection-creation-rate-per-ip", type=_non_negative_float,
                        default=0.0, metavar="PER_SECOND",
                        help="new connections a second one client IP may open (a burst of "
                             "one second's worth); over it a connection is held unread and "
                             f"closed after {THROTTLED_CLOSE_S:g} s, before TLS or SASL (Kafka's "
                             "connection_creation_rate; default 0: no limit)")
    parser.add_argument("--metrics-port", type=_non_negative, default=None,
                        help="serve Prometheus broker_* metrics on --metrics-host:PORT "
                             "(0: any free port, printed as 'broker metrics url=...')")
    parser.add_argument("--metrics-host", default=None,
                        help="address of the metrics endpoint (default: --host); e.g. the "
                             "monitoring network's")
    parser.add_argument("--metrics-names", action=argparse.BooleanOptionalAction,
                        default=True,
                        help="label topic and group metrics by name (default); with "
                             "--no-metrics-names they are summed without names, so a scrape "
                             "reveals no topic or group")
    lim = parser.add_argument_group(
        "request limits", "what one client may make the broker hold or do (docs/broker.md, "
                          "\"Limits\")")
    lim.add_argument("--max-request-bytes", type=_positive, default=DEFAULT_MAX_FRAME_BYTES,
                     help="largest Produce request frame (Kafka's socket.request.max.bytes; "
                          "default 104857600); other APIs have smaller limits")
    lim.add_argument("--queued-max-request-bytes", type=_positive,
                     default=DEFAULT_QUEUED_MAX_REQUEST_BYTES,
                     help="request bytes being received, all connections together, beyond "
                          "64 KiB each (Kafka's queued.max.request.bytes; default 256 MiB)")
    lim.add_argument("--fetch-max-bytes", type=_positive, default=DEFAULT_FETCH_MAX_BYTES,
                     help="largest fetch response (Kafka's fetch.max.bytes; default 55 MiB)")
    lim.add_argument("--max-decompressed-bytes", type=_positive,
                     default=DEFAULT_MAX_DECOMPRESSED_BYTES,
                     help="what one batch may decompress to when the broker reads inside it "
                          "(ListOffsets by time, a topic's compression.type; default 16 MiB)")
    lim.add_argument("--connections-max-idle-ms", type=_ms, metavar="DURATION",
                     default=DEFAULT_CONNECTIONS_MAX_IDLE_MS,
                     help="close a connection idle this long (Kafka's connections.max.idle.ms; "
                          f"default 10m; 0: never; {DURATION_HELP} ms)")
    lim.add_argument("--max-connections", type=_non_negative, default=DEFAULT_MAX_CONNECTIONS,
                     help="connections of all clients together, kept below the open-files "
                          f"limit (Kafka's max.connections; default {DEFAULT_MAX_CONNECTIONS})")
    lim.add_argument("--producer-id-expiration-ms", type=_positive_ms,
                     metavar="DURATION", default=86_400_000,
                     help="forget an idempotent producer idle this long (Kafka's "
                          f"producer.id.expiration.ms; default 1d; {DURATION_HELP} ms)")
    lim.add_argument("--max-producers-per-partition", type=_positive, default=1000,
                     help="idempotent producers a partition remembers; the least recently "
                          "written go first (default 1000)")
    # For the bench's before/after comparison only (bench/broker_soak.py): not for use.
    lim.add_argument("--max-in-flight-requests", type=_non_negative, choices=(0, 1), default=1,
                     help=argparse.SUPPRESS)
    lim.add_argument("--unsafe-skip-produce-crc", action="store_true", help=argparse.SUPPRESS)
    grp = parser.add_argument_group(
        "consumer groups", "the group coordinator, with Kafka's settings and defaults")
    grp.add_argument("--group-initial-rebalance-delay-ms", type=_ms,
                     metavar="DURATION", default=3000,
                     help="a new group waits this long for more members before its first "
                          "rebalance (Kafka's group.initial.rebalance.delay.ms; default 3s; "
                          f"{DURATION_HELP} ms)")
    grp.add_argument("--group-min-session-timeout-ms", type=_ms, metavar="DURATION", default=6000,
                     help="smallest session.timeout.ms a member may ask for (default 6s; "
                          f"{DURATION_HELP} ms)")
    grp.add_argument("--group-max-session-timeout-ms", type=_ms,
                     metavar="DURATION", default=1_800_000,
                     help="largest session.timeout.ms a member may ask for (default 30m; "
                          f"{DURATION_HELP} ms)")
    grp.add_argument("--group-consumer-session-timeout-ms", type=_ms, metavar="DURATION",
                     default=45_000,
                     help="a KIP-848 member (group.protocol=consumer) that sends no heartbeat "
                          "for this long leaves its group (Kafka's "
                          f"group.consumer.session.timeout.ms; default 45s; {DURATION_HELP} "
                          "ms)")
    grp.add_argument("--group-consumer-heartbeat-interval-ms", type=_ms, metavar="DURATION",
                     default=5_000,
                     help="how often a KIP-848 member heartbeats (Kafka's "
                          "group.consumer.heartbeat.interval.ms; default 5s; "
                          f"{DURATION_HELP} ms)")
    grp.add_argument("--offsets-retention-minutes", type=_minutes,
                     default=float(DEFAULT_OFFSETS_RETENTION_MS), metavar="DURATION",
                     dest="offsets_retention_ms",
                     help="an empty group, and its committed offsets, go after this long "
                          f"(Kafka's offsets.retention.minutes; default 7d; {DURATION_HELP} "
                          "minutes)")
    grp.add_argument("--max-groups", type=_positive, default=DEFAULT_MAX_GROUPS,
                     help="groups the broker keeps; a new one beyond is refused "
                          f"GROUP_MAX_SIZE_REACHED (default {DEFAULT_MAX_GROUPS})")
    grp.add_argument("--group-max-size", type=_positive, default=DEFAULT_GROUP_MAX_SIZE,
                     help="members of one group (Kafka's group.max.size; default "
                          f"{DEFAULT_GROUP_MAX_SIZE})")
    grp.add_argument("--group-max-metadata-bytes", type=_positive,
                     default=DEFAULT_GROUP_MAX_METADATA_BYTES,
                     help="the members' metadata and assignments of one group together "
                          f"(default {DEFAULT_GROUP_MAX_METADATA_BYTES}, Kafka's bound: a "
                          "group is one record of its offsets topic)")
    grp.add_argument("--groups-max-metadata-bytes", type=_positive,
                     default=DEFAULT_GROUPS_MAX_METADATA_BYTES,
                     help="... of every group together (default 64 MiB): a join or "
                          "assignment past it is refused UNKNOWN_SERVER_ERROR")
    sec = parser.add_argument_group(
        "security", "TLS and SASL of the listener (files only: secrets never go on the "
                    "command line; see docs/broker.md)")
    sec.add_argument("--security-protocol", choices=PROTOCOLS, default="PLAINTEXT",
                     help="the listener's protocol, as Kafka's security.protocol")
    sec.add_argument("--ssl-certfile", default=None, help="PEM certificate chain")
    sec.add_argument("--ssl-keyfile", default=None,
                     help="PEM private key, mode 0600 (default: inside --ssl-certfile)")
    sec.add_argument("--ssl-client-ca", default=None,
                     help="require client certificates signed by this PEM CA")
    sec.add_argument("--sasl-users", default=None,
                     help="users file (TOML, mode 0600; `appliance broker-user add`)")
    sec.add_argument("--sasl-mechanisms", type=_mechanisms, default=None,
                     help="comma-separated, e.g. SCRAM-SHA-512 (default: PLAIN, "
                          "SCRAM-SHA-256, SCRAM-SHA-512 over TLS; no PLAIN without TLS)")
    sec.add_argument("--password-check-workers", type=_positive, default=1,
                     help="processes that check SASL/PLAIN passwords (PBKDF2) off the "
                          "event loop, at a lower CPU priority (default 1)")
    sec.add_argument("--failed-auth-close-delay-ms", type=_ms, metavar="DURATION", default=100,
                     help="after refusing an authentication, close the connection this "
                          "much later, as Kafka's connection.failed.authentication.delay.ms "
                          f"(default 100ms; {DURATION_HELP} ms)")
    acl = parser.add_argument_group(
        "authorization", "Kafka's ACLs, kept in DATA_DIR/acls.json (`appliance broker-user "
                         "acl`, or CreateAcls); SIGHUP re-reads the file (docs/broker.md)")
    acl.add_argument("--authorizer", choices=AUTHORIZERS, default="none",
                     help="none: every client may do everything (default); acl: only what "
                          "an ACL allows, or a super user")
    acl.add_argument("--super-users", type=_principals, default=(),
                     help="comma-separated principals that bypass ACLs, e.g. User:admin")
    parser.set_defaults(func=run_from_args)


def _principals(value: str) -> tuple[str, ...]:
    out = tuple(p.strip() for p in value.split(",") if p.strip())
    try:
        for p in out:
            check_principal(p, "--super-users")
    except AclError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return out


def _mechanisms(value: str) -> tuple[str, ...]:
    return tuple(m.strip().upper() for m in value.split(",") if m.strip())


def run_from_args(args: argparse.Namespace) -> int:
    if args.group_consumer_heartbeat_interval_ms >= args.group_consumer_session_timeout_ms:
        print(f"broker: --group-consumer-heartbeat-interval-ms "
              f"{args.group_consumer_heartbeat_interval_ms} must be below "
              f"--group-consumer-session-timeout-ms {args.group_consumer_session_timeout_ms}",
              file=sys.stderr)
        return 2
    if args.group_min_session_timeout_ms > args.group_max_session_timeout_ms:
        print(f"broker: --group-min-session-timeout-ms {args.group_min_session_timeout_ms} "
              f"is above --group-max-session-timeout-ms {args.group_max_session_timeout_ms}",
              file=sys.stderr)
        return 2
    if args.default_partitions > args.max_partitions_per_topic:
        print(f"broker: --default-partitions {args.default_partitions} is more than "
              f"--max-partitions-per-topic {args.max_partitions_per_topic}", file=sys.stderr)
        return 2
    if args.queued_max_request_bytes < args.max_request_bytes:
        print(f"broker: --queued-max-request-bytes {args.queued_max_request_bytes} is below "
              f"--max-request-bytes {args.max_request_bytes}: such a request could never be "
              f"read", file=sys.stderr)
        return 2
    options = {"initial_topics": args.topics, "auto_create_topics": args.auto_create_topics,
               "default_partitions": max(args.default_partitions, 1),
               "retention_bytes": None if args.retention_bytes < 0 else args.retention_bytes,
               "retention_ms": None if args.retention_ms < 0 else args.retention_ms,
               "retention_total_bytes": args.retention_total_bytes,
               "retention_total_policy": BudgetPolicy(args.retention_total_policy),
               "log_cleaner_dedupe_buffer_bytes": args.log_cleaner_dedupe_buffer_size,
               "segment_ms": args.segment_ms, "full_recovery": args.full_recovery,
               "max_frame_bytes": args.max_request_bytes,
               "queued_max_request_bytes": args.queued_max_request_bytes,
               "fetch_max_bytes": args.fetch_max_bytes,
               "max_decompressed_bytes": args.max_decompressed_bytes,
               "connections_max_idle_ms": args.connections_max_idle_ms,
               "max_connections": args.max_connections,
               "producer_id_expiration_ms": args.producer_id_expiration_ms,
               "max_producers_per_partition": args.max_producers_per_partition,
               "max_in_flight_requests": args.max_in_flight_requests,
               "verify_produce_crc": not args.unsafe_skip_produce_crc,
               "offsets_retention_ms": int(args.offsets_retention_ms),
               "max_groups": args.max_groups, "group_max_size": args.group_max_size,
               "group_max_metadata_bytes": args.group_max_metadata_bytes,
               "groups_max_metadata_bytes": args.groups_max_metadata_bytes,
               "metrics_names": args.metrics_names,
               "flush": Flush(args.flush), "flush_interval_ms": args.flush_interval_ms,
               "max_partitions_per_topic": args.max_partitions_per_topic,
               "max_connections_per_ip": args.max_connections_per_ip,
               "max_connection_creation_rate_per_ip":
                   args.max_connection_creation_rate_per_ip,
               "password_check_workers": args.password_check_workers,
               "segment_bytes": max(args.segment_bytes, 1),
               "security_protocol": args.security_protocol, "ssl_certfile": args.ssl_certfile,
               "ssl_keyfile": args.ssl_keyfile, "ssl_client_ca": args.ssl_client_ca,
               "sasl_users_file": args.sasl_users, "sasl_mechanisms": args.sasl_mechanisms,
               "failed_auth_close_delay_ms": args.failed_auth_close_delay_ms,
               "group_initial_rebalance_delay_ms": args.group_initial_rebalance_delay_ms,
               "group_min_session_timeout_ms": args.group_min_session_timeout_ms,
               "group_max_session_timeout_ms": args.group_max_session_timeout_ms,
               "group_consumer_session_timeout_ms": args.group_consumer_session_timeout_ms,
               "group_consumer_heartbeat_interval_ms":
                   args.group_consumer_heartbeat_interval_ms,
               "authorizer": AuthorizerKind(args.authorizer), "super_users": args.super_users}
    if args.max_message_bytes is not None:
        options["max_message_bytes"] = args.max_message_bytes
    return run_broker(args.host, args.port, args.data_dir, metrics_port=args.metrics_port,
                      metrics_host=args.metrics_host, **options)


def raise_open_files() -> int:
    """Raise the soft open-files limit to the hard one (a unit's LimitNOFILE, else the
    shell's): every connection and segment holds a descriptor. Returns the soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY:
        try:
            hard = int(open("/proc/sys/fs/nr_open").read())
        except (OSError, ValueError):
            hard = 1 << 20
    if soft == resource.RLIM_INFINITY or soft >= hard:
        return soft if soft != resource.RLIM_INFINITY else hard
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError):
        return soft
    return hard


async def _serve(config: BrokerConfig, loop_name: str, metrics_port: int | None = None,
                 metrics_host: str | None = None, open_files: int = 1 << 20) -> int:
    from appliance.broker.broker_metrics import BrokerMetrics
    from appliance.broker.broker_metrics import serve as serve_metrics
    from appliance.broker.server import BrokerServer

    log = get_logger("appliance.broker")
    from appliance.broker.storage.durable_io import StorageError
    from appliance.broker.storage.topic_registry import TopicRegistryError

    try:
        server = BrokerServer(config, BrokerMetrics() if metrics_port is not None else None,
                              open_files=open_files)
    except (OSError, StorageError) as exc:
        log.error("broker.data_dir_unusable", data_dir=config.data_dir, error=str(exc))
        print(f"broker: --data-dir {config.data_dir}: {exc}", file=sys.stderr)
        return 2
    except TopicRegistryError as exc:
        log.error("broker.bad_topics", error=exc.message)
        print(f"broker: --topics: {exc.message}", file=sys.stderr)
        return 2
    except ListenerError as exc:
        log.error("broker.bad_security", error=str(exc))
        print(f"broker: {exc}", file=sys.stderr)
        return 2
    except AclStoreError as exc:
        log.error("broker.bad_acls", error=str(exc))
        print(f"broker: {exc}", file=sys.stderr)
        return 2
    try:
        host, port = await server.start()
    except OSError as exc:
        log.error("broker.bind_failed", host=config.host, port=config.port, error=str(exc))
        print(f"broker: cannot listen on {config.host}:{config.port}: {exc}", file=sys.stderr)
        return 1
    http = None
    if metrics_port is not None:
        where = metrics_host or config.host
        try:
            http, bound = serve_metrics(server, where, metrics_port)
        except OSError as exc:
            log.error("broker.metrics_bind_failed", port=metrics_port, error=str(exc))
            print(f"broker: --metrics-port {metrics_port}: {exc}", file=sys.stderr)
            await server.stop()
            return 1
        url = f"http://{where}:{bound}/metrics"
        log.info("broker.metrics", url=url)
        print(f"{METRICS_PREFIX}{url}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    loop.add_signal_handler(signal.SIGHUP, _reload_acls, server, log)
    bootstrap = f"{host}:{port}"
    print(f"{READY_PREFIX}{bootstrap}", flush=True)
    log.info("broker.ready", bootstrap=bootstrap, data_dir=config.data_dir, loop=loop_name,
             security_protocol=config.security_protocol,
             sasl_mechanisms=list(server.security.sasl.mechanisms) if server.security.sasl
             else [],
             topics=sorted(server.registry.topics), flush=config.flush,
             open_files=open_files, max_connections=server.max_connections,
             log_budget_bytes=server.registry.budget.limit,
             log_budget=server.registry.budget.source,
             log_bytes=server.registry.budget.used)
    await stop.wait()
    log.info("broker.stopping", bootstrap=bootstrap)
    await server.stop()
    if http is not None:
        http.shutdown()
        http.server_close()
    log.info("broker.stopped", bootstrap=bootstrap)
    return 0


def _reload_acls(server, log) -> None:
    """SIGHUP: the ACL file's bindings in force now; a bad file changes nothing."""
    try:
        count = server.apis.reload_acls()
    except AclStoreError as exc:
        log.error("broker.acls_reload_failed", error=str(exc))
        return
    log.info("broker.acls_reloaded", acls=count)


def run_broker(host: str = "127.0.0.1", port: int = 9092, data_dir: str | None = None,
               metrics_port: int | None = None, metrics_host: str | None = None,
               **options) -> int:
    """Run until a signal; 0 on a clean stop, 1 if the broker cannot start."""
    configure()
    config = BrokerConfig(host=host, port=port, data_dir=data_dir, **options)
    loop_name = _install_uvloop()
    open_files = raise_open_files()
    return asyncio.run(_serve(config, loop_name, metrics_port, metrics_host, open_files))
