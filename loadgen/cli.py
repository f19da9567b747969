"""The ``loadgen`` command line: ``run`` (through the appliance) and ``floor`` (alone).

Exit codes: 0 success; 2 bad usage (argparse) or bad settings, one line naming the
option; 1 runtime failure (e.g. the broker cannot be reached, or events could not be
delivered to it); 3 the run finished but expected alerts or dead letters were lost
(never arrived within ``--grace``).
Falling behind schedule is reported (stderr and report) but does not change the code.
"""

from __future__ import annotations

import argparse
import json
import sys

EXIT_OK, EXIT_RUNTIME, EXIT_USAGE, EXIT_LOST = 0, 1, 2, 3


def _common(p: argparse.ArgumentParser, d) -> None:
    p.add_argument("--bootstrap", required=True, help="Kafka bootstrap servers (host:port)")
    p.add_argument("--rate", type=float, required=True, help="events per second")
    p.add_argument("--duration", type=float, required=True, help="seconds of load")
    p.add_argument("--ramp", type=float, default=d.ramp, help="seconds to ramp up from 0")
    p.add_argument("--workers", type=int, default=d.workers, help="producer processes")
    p.add_argument("--grace", type=float, default=d.grace,
                   help="seconds to wait for answers after the last send")
    p.add_argument("--behind-ms", type=float, default=d.behind_ms,
                   help="an event sent later than this counts as behind schedule")
    p.add_argument("--partitions", type=int, default=d.topic_partitions,
                   help="partitions of created topics")
    p.add_argument("--linger-ms", type=float, default=d.linger_ms, help="producer linger.ms")
    p.add_argument("--retry-s", type=float, default=d.retry_s,
                   help="re-send events the broker did not acknowledge for up to this long "
                        "after the schedule's end")
    p.add_argument("--report", default=None, help="write FILE.json, FILE.md and FILE.png")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.add_argument("--floor-topic", default=d.floor_topic)
    p.add_argument("--kafka-config", default=None, metavar="FILE",
                   help="TOML file whose [kafka] table holds the security settings (an "
                        "appliance.toml works; APPLIANCE_KAFKA_* env vars override; default "
                        "$LOADGEN_KAFKA_CONFIG). Secrets never on the command line.")


def build_parser() -> argparse.ArgumentParser:
    from appliance import __version__
    from loadgen.config import LoadConfig as d  # its defaults are the CLI's defaults

    parser = argparse.ArgumentParser(prog="loadgen", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"loadgen {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="open-loop load with end-to-end latency accounting")
    _common(run, d)
    run.add_argument("--alert-ratio", type=float, default=d.alert_ratio,
                     help="share of events matching an example rule (split evenly)")
    run.add_argument("--bad-ratio", type=float, default=d.bad_ratio,
                     help="share of malformed events")
    run.add_argument("--events-topic", default=d.events_topic)
    run.add_argument("--alerts-topic", default=d.alerts_topic)
    run.add_argument("--dlq-topic", default=d.dlq_topic)
    run.add_argument("--metrics-port", type=int, default=d.metrics_port,
                     help="Prometheus port (0: off)")
    run.add_argument("--metrics-host", default=d.metrics_host,
                     help="address the Prometheus endpoint binds to (default: loopback)")
    run.add_argument("--floor-seconds", type=float, default=2.0,
                     help="measure the instrument's floor first for this long (0: skip)")
    run.add_argument("--floor-rate", type=float, default=d.floor_rate,
                     help="rate of the floor run (default: --rate)")
    run.add_argument("--floor-ms", type=float, default=d.floor_ms,
                     help="floor p99 measured elsewhere (skips measuring it)")
    run.add_argument("--self-test", action="store_true",
                     help="same as the floor command: no appliance in between")
    run.set_defaults(func=_cmd_run)

    floor = sub.add_parser("floor", help="the instrument's own latency floor: produce to a "
                                         "topic and consume it back, no appliance")
    _common(floor, d)
    floor.set_defaults(func=_cmd_floor)
    return parser


def _config(args: argparse.Namespace, **extra):
    from loadgen.config import ConfigError, LoadConfig
    from loadgen.kafka_config import KafkaConfigError, load_security

    try:
        security = load_security(args.kafka_config)
    except KafkaConfigError as exc:
        raise ConfigError(f"kafka-config: {exc}") from None
    return LoadConfig(
        security=security,
        bootstrap=args.bootstrap, rate=args.rate, duration=args.duration, ramp=args.ramp,
        workers=args.workers, grace=args.grace, behind_ms=args.behind_ms,
        topic_partitions=args.partitions, linger_ms=args.linger_ms, progress=not args.quiet,
        floor_topic=args.floor_topic, retry_s=args.retry_s, **extra,
    )


def _cmd_run(args: argparse.Namespace):
    from loadgen.run import run_floor, run_load

    if args.self_test:
        return run_floor(_config(args))
    return run_load(_config(
        args, alert_ratio=args.alert_ratio, bad_ratio=args.bad_ratio,
        events_topic=args.events_topic, alerts_topic=args.alerts_topic,
        dlq_topic=args.dlq_topic, metrics_port=args.metrics_port,
        metrics_host=args.metrics_host, floor_seconds=args.floor_seconds,
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
    from appliance.logs import configure

    args = build_parser().parse_args(argv)
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
        return EXIT_RUNTIME
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
