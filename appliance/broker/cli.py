"""``appliance broker``: run the broker in the foreground until SIGTERM/SIGINT."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys

from appliance.broker.acl.model import AclError, check_principal
from appliance.broker.acl.store import AclStoreError
from appliance.broker.connections.rate import THROTTLED_CLOSE_S
from appliance.broker.security.listener import PROTOCOLS, ListenerError
from appliance.broker.settings import (
    AUTHORIZERS,
    DEFAULT_MAX_CONNECTIONS_PER_IP,
    DEFAULT_MAX_PARTITIONS_PER_TOPIC,
    FLUSH_POLICIES,
    AuthorizerKind,
    BrokerConfig,
    Flush,
    parse_topics,
)
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


def _non_negative(value: str) -> int:
    n = int(value)
    if n < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {n}")
    return n


def _non_negative_float(value: str) -> float:
    try:
        x = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, got {value!r}") from None
    if not x >= 0 or x == float("inf"):  # also refuses nan
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {value}")
    return x


def _positive(value: str) -> int:
    n = int(value)
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {n}")
    return n


def _port(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a port number, got {value!r}") from None
    if not 0 <= n <= 65535:
        raise argparse.ArgumentTypeError(f"must be 0..65535 (0: any free port), got {n}")
    return n


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
    parser.add_argument("--retention-bytes", type=_non_negative, default=None,
                        help="per partition; oldest batches/segments go first")
    parser.add_argument("--retention-ms", type=_non_negative, default=None,
                        help="per partition; older batches/segments go (default: kept)")
    parser.add_argument("--max-message-bytes", type=_non_negative, default=None,
                        help="largest accepted record batch (default 1048588)")
    parser.add_argument("--flush", choices=FLUSH_POLICIES, default="write",
                        help="write: write() before the ack (survives kill -9, not a power "
                             "cut); fsync: data and new directory entries synced before the "
                             "ack; interval: synced every --flush-interval-ms (docs/broker.md)")
    parser.add_argument("--flush-interval-ms", type=_non_negative, default=1000,
                        help="with --flush interval: how often to sync")
    parser.add_argument("--segment-bytes", type=_non_negative, default=64 * 1024 * 1024,
                        help="a partition's segment file rolls at this size")
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
                        help="serve Prometheus broker_* metrics on --host:PORT "
                             "(0: any free port, printed as 'broker metrics url=...')")
    grp = parser.add_argument_group(
        "consumer groups", "the group coordinator, with Kafka's settings and defaults")
    grp.add_argument("--group-initial-rebalance-delay-ms", type=_non_negative, default=3000,
                     help="a new group waits this long for more members before its first "
                          "rebalance (Kafka's group.initial.rebalance.delay.ms; default 3000)")
    grp.add_argument("--group-min-session-timeout-ms", type=_non_negative, default=6000,
                     help="smallest session.timeout.ms a member may ask for (default 6000)")
    grp.add_argument("--group-max-session-timeout-ms", type=_non_negative, default=1_800_000,
                     help="largest session.timeout.ms a member may ask for (default 1800000)")
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
    sec.add_argument("--failed-auth-close-delay-ms", type=_non_negative, default=100,
                     help="after refusing an authentication, close the connection this "
                          "much later, as Kafka's connection.failed.authentication.delay.ms "
                          "(default 100)")
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
    if args.group_min_session_timeout_ms > args.group_max_session_timeout_ms:
        print(f"broker: --group-min-session-timeout-ms {args.group_min_session_timeout_ms} "
              f"is above --group-max-session-timeout-ms {args.group_max_session_timeout_ms}",
              file=sys.stderr)
        return 2
    if args.default_partitions > args.max_partitions_per_topic:
        print(f"broker: --default-partitions {args.default_partitions} is more than "
              f"--max-partitions-per-topic {args.max_partitions_per_topic}", file=sys.stderr)
        return 2
    options = {"initial_topics": args.topics, "auto_create_topics": args.auto_create_topics,
               "default_partitions": max(args.default_partitions, 1),
               "retention_bytes": args.retention_bytes, "retention_ms": args.retention_ms,
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
               "authorizer": AuthorizerKind(args.authorizer), "super_users": args.super_users}
    if args.max_message_bytes is not None:
        options["max_message_bytes"] = args.max_message_bytes
    return run_broker(args.host, args.port, args.data_dir, metrics_port=args.metrics_port,
                      **options)


async def _serve(config: BrokerConfig, loop_name: str, metrics_port: int | None = None) -> int:
    from appliance.broker.broker_metrics import BrokerMetrics
    from appliance.broker.broker_metrics import serve as serve_metrics
    from appliance.broker.server import BrokerServer

    log = get_logger("appliance.broker")
    from appliance.broker.storage.topic_registry import TopicError

    try:
        server = BrokerServer(config, BrokerMetrics() if metrics_port is not None else None)
    except OSError as exc:
        log.error("broker.data_dir_unusable", data_dir=config.data_dir, error=str(exc))
        print(f"broker: --data-dir {config.data_dir}: {exc}", file=sys.stderr)
        return 2
    except TopicError as exc:
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
        try:
            http, bound = serve_metrics(server, config.host, metrics_port)
        except OSError as exc:
            log.error("broker.metrics_bind_failed", port=metrics_port, error=str(exc))
            print(f"broker: --metrics-port {metrics_port}: {exc}", file=sys.stderr)
            await server.stop()
            return 1
        url = f"http://{config.host}:{bound}/metrics"
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
             topics=sorted(server.registry.topics), flush=config.flush)
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
               metrics_port: int | None = None, **options) -> int:
    """Run until a signal; 0 on a clean stop, 1 if the broker cannot start."""
    configure()
    config = BrokerConfig(host=host, port=port, data_dir=data_dir, **options)
    loop_name = _install_uvloop()
    return asyncio.run(_serve(config, loop_name, metrics_port))
