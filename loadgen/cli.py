"""The ``loadgen`` command line: ``run`` (through the appliance) and ``floor`` (alone).

Exit codes (the README's table): 0 success; 1 a runtime failure (the broker cannot be
reached, events could not be delivered to it); 2 bad usage or settings, one line naming
the flag, or the ``loadgen`` extra not installed; 3 the run finished but expected alerts
or dead letters were lost (never arrived within ``--grace``); 130 interrupted (Ctrl-C).
Falling behind schedule is reported (stderr and report) but does not change the code.
"""

from __future__ import annotations

import argparse
import json
import sys

from appliance import __version__
from appliance.command_tree import (
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_LOST,
    EXIT_OK,
    EXIT_USAGE,
    LazyVersion,
    Parser,
    count_arg,
    hidden_alias,
    number_arg,
    subcommands,
)
from appliance.durations import duration_arg, format_ms, format_seconds, ms_arg
from appliance.extras import MissingExtra, require
from loadgen.config import LoadConfig as d  # its defaults are the CLI's defaults

EXIT_RUNTIME = EXIT_FAILURE  # the name this module's callers know
FLOOR_SECONDS = 2.0

EXIT_CODES = """exit codes:
  0    every expected alert and dead letter arrived
  1    a runtime failure (Kafka unreachable, events not delivered)
  2    bad usage or settings (one line names the flag), or the loadgen extra missing
  3    the run finished but alerts or dead letters were lost
  130  interrupted (Ctrl-C)"""

_ratio = number_arg(0.0, maximum=1.0)
#: The ``-ms`` flags: any duration (250ms, 1s), a plain number in milliseconds as before.
_ms = ms_arg(whole=False)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bootstrap-server", metavar="HOST:PORT[,...]", default=None,
                   help="the Kafka to load (required)")
    hidden_alias(p, "--bootstrap", dest="bootstrap_server")
    p.add_argument("--rate", type=number_arg(0, above=True), required=True,
                   help="events per second (required)")
    p.add_argument("--duration", type=duration_arg(allow_zero=False), required=True,
                   metavar="DURATION", help="how long to send: 20s, 5m, or plain seconds "
                                            "(required)")
    p.add_argument("--ramp", type=duration_arg(), default=d.ramp, metavar="DURATION",
                   help="ramp up from 0 over this long (default 0: no ramp)")
    p.add_argument("--workers", type=count_arg(1), default=d.workers,
                   help="producer processes")
    p.add_argument("--grace", type=duration_arg(), default=d.grace, metavar="DURATION",
                   help=f"wait this long for answers after the last send (default "
                        f"{format_seconds(d.grace)})")
    p.add_argument("--behind-ms", type=_ms, default=d.behind_ms, metavar="DURATION",
                   help=f"an event sent later than this counts as behind schedule (default "
                        f"{format_ms(d.behind_ms)}; a plain number is ms)")
    p.add_argument("--partitions", type=count_arg(1), default=d.topic_partitions,
                   help="partitions of created topics")
    p.add_argument("--linger-ms", type=_ms, default=d.linger_ms, metavar="DURATION",
                   help="producer linger.ms (default 0; a plain number is ms)")
    p.add_argument("--retry", type=duration_arg(), default=d.retry_s, metavar="DURATION",
                   help=f"re-send events the broker did not acknowledge for up to this long "
                        f"after the schedule's end (default {format_seconds(d.retry_s)})")
    hidden_alias(p, "--retry-s", dest="retry", type=duration_arg())
    p.add_argument("--report", default=None, metavar="FILE.json",
                   help="write FILE.json, FILE.md and FILE.png")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.add_argument("--floor-topic", default=d.floor_topic,
                   help="the topic the floor measurement produces to and reads back")
    p.add_argument("--kafka-config", default=None, metavar="FILE",
                   help="TOML file whose [kafka] table holds the security settings (an "
                        "appliance.toml works; APPLIANCE_KAFKA_* env vars override; default "
                        "$LOADGEN_KAFKA_CONFIG). Secrets never on the command line.")


def _version() -> str:
    """``loadgen --version``: loadgen, and the Kafka clients whose behaviour it measures
    through (librdkafka's version decides the producer's batching and fetching). Imported
    here: importlib.metadata and confluent-kafka would double what ``loadgen --help``
    costs."""
    from appliance.versions import python_kafka_clients

    try:
        import confluent_kafka
    except ImportError:  # the loadgen extra is missing: the line says so
        librdkafka = None
    else:
        librdkafka = str(confluent_kafka.libversion()[0])
    return "\n".join([f"loadgen {__version__}", *python_kafka_clients(librdkafka)])


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="loadgen",
        description="Open-loop load on the appliance with end-to-end latency accounting: "
                    "every event's alert (or dead letter) is waited for, counted and timed.",
        epilog="examples:\n"
               "  loadgen run --bootstrap-server 127.0.0.1:9092 --rate 500 --duration 20s\n"
               "  loadgen floor --bootstrap-server 127.0.0.1:9092 --rate 500 --duration 10s\n"
               "  loadgen COMMAND --help\n\n" + EXIT_CODES)
    parser.add_argument("--version", action=LazyVersion, text=_version,
                        help="print the versions of loadgen and the Kafka clients it runs, "
                             "and exit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser(
        "run", help="open-loop load with end-to-end latency accounting",
        description="Send events on a fixed schedule (open loop: no coordinated omission) "
                    "to the events topic, read the alerts and dead letters back, and "
                    "report end-to-end latency from each event's time stamp, after "
                    "measuring the instrument's own floor.",
        epilog="examples:\n"
               "  loadgen run --bootstrap-server 127.0.0.1:9092 --rate 500 --duration 20s\n"
               "  loadgen run --bootstrap-server 127.0.0.1:9092 --rate 2000 --duration 5m "
               "--metrics-port 9466 --report reports/run.json\n\n" + EXIT_CODES)
    _common(run)
    run.add_argument("--alert-ratio", type=_ratio, default=d.alert_ratio,
                     help="share of events matching an example rule (split evenly)")
    run.add_argument("--bad-ratio", type=_ratio, default=d.bad_ratio,
                     help="share of malformed events (answered by dead letters)")
    run.add_argument("--events-topic", default=d.events_topic, help="where events go")
    run.add_argument("--alerts-topic", default=d.alerts_topic, help="where alerts come from")
    run.add_argument("--dlq-topic", default=d.dlq_topic,
                     help="where dead letters come from")
    run.add_argument("--metrics-port", type=count_arg(0), default=d.metrics_port,
                     help="serve Prometheus loadgen_* metrics on this port (default 0: "
                          "off; `appliance watch` scrapes 9466)")
    run.add_argument("--metrics-host", default=d.metrics_host,
                     help="address the Prometheus endpoint binds to (default: loopback)")
    run.add_argument("--floor-duration", type=duration_arg(), default=FLOOR_SECONDS,
                     metavar="DURATION",
                     help=f"measure the instrument's floor first for this long (default "
                          f"{format_seconds(FLOOR_SECONDS)}; 0: skip)")
    hidden_alias(run, "--floor-seconds", dest="floor_duration", type=duration_arg())
    run.add_argument("--floor-rate", type=number_arg(0, above=True), default=d.floor_rate,
                     help="rate of the floor run (default: --rate)")
    run.add_argument("--floor-ms", type=_ms, default=d.floor_ms, metavar="DURATION",
                     help="floor p99 measured elsewhere (skips measuring it; a plain number "
                          "is ms)")
    run.add_argument("--self-test", action="store_true",
                     help="same as the floor command: no appliance in between")
    run.set_defaults(func=_cmd_run)

    floor = sub.add_parser(
        "floor", help="the instrument's own latency floor: produce to a topic and consume "
                      "it back, no appliance",
        description="The instrument's own latency floor: produce to --floor-topic and "
                    "consume it back, with no appliance in between.",
        epilog="examples:\n"
               "  loadgen floor --bootstrap-server 127.0.0.1:9092 --rate 500 --duration "
               "10s\n\n" + EXIT_CODES)
    _common(floor)
    floor.set_defaults(func=_cmd_floor)
    return parser


def _config(args: argparse.Namespace, **extra):
    from loadgen.config import ConfigError, LoadConfig
    from loadgen.kafka_config import KafkaConfigError, load_security

    try:
        security = load_security(args.kafka_config)
    except KafkaConfigError as exc:
        raise ConfigError(f"--kafka-config: {exc}") from None
    return LoadConfig(
        security=security,
        bootstrap=args.bootstrap_server, rate=args.rate, duration=args.duration,
        ramp=args.ramp, workers=args.workers, grace=args.grace, behind_ms=args.behind_ms,
        topic_partitions=args.partitions, linger_ms=args.linger_ms, progress=not args.quiet,
        floor_topic=args.floor_topic, retry_s=args.retry, **extra,
    )


def _cmd_run(args: argparse.Namespace):
    from loadgen.run import run_floor, run_load

    if args.self_test:
        return run_floor(_config(args))
    return run_load(_config(
        args, alert_ratio=args.alert_ratio, bad_ratio=args.bad_ratio,
        events_topic=args.events_topic, alerts_topic=args.alerts_topic,
        dlq_topic=args.dlq_topic, metrics_port=args.metrics_port,
        metrics_host=args.metrics_host, floor_seconds=args.floor_duration,
        floor_rate=args.floor_rate, floor_ms=args.floor_ms,
    ))


def _cmd_floor(args: argparse.Namespace):
    from loadgen.run import run_floor

    return run_floor(_config(args))


def _summary(report) -> dict:
    keys = ("run_id", "mode", "sent", "achieved_rate", "expected_alerts", "received_alerts",
            "lost", "duplicates", "dlq_expected", "dlq_received", "floor_ms", "latency_ms",
            "behind_schedule")
    return {k: getattr(report, k) for k in keys}


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.bootstrap_server:
        parsers = subcommands(parser)
        assert parsers is not None, "loadgen's parser has its subcommands"
        parsers.choices[args.command].error(
            "the following arguments are required: --bootstrap-server")
    try:
        require("loadgen", f"loadgen {args.command}")
    except MissingExtra as exc:
        print(exc, file=sys.stderr)
        return EXIT_USAGE
    from appliance.logs import configure

    configure("WARNING")
    from loadgen.collector import BrokerUnavailable
    from loadgen.config import ConfigError
    from loadgen.report import write_reports

    try:
        report = args.func(args)
    except ConfigError as exc:
        print(f"loadgen {args.command}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (BrokerUnavailable, RuntimeError) as exc:
        print(f"loadgen {args.command}: {exc}", file=sys.stderr)
        return EXIT_RUNTIME
    except KeyboardInterrupt:
        print(f"loadgen {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    if args.report:
        try:
            paths = write_reports(report, args.report)
        except OSError as exc:
            print(f"loadgen {args.command}: cannot write report {args.report}: {exc}",
                  file=sys.stderr)
            return EXIT_RUNTIME
        print(f"loadgen: report written to {paths['json']}, {paths['md']}, {paths['png']}",
              file=sys.stderr)
    print(json.dumps(_summary(report), indent=2))
    if report.send_failed:
        print(f"loadgen: {report.send_failed} events could not be delivered to the broker",
              file=sys.stderr)
        return EXIT_RUNTIME
    if not report.ok:
        print(f"loadgen: LOST {report.lost} alerts and {report.dlq_lost} dead letters",
              file=sys.stderr)
        return EXIT_LOST
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
