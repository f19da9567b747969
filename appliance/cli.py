"""The ``appliance`` command line: ``run``, ``demo``, ``broker`` and ``rules check``.

Exit codes: 0 success; 2 bad usage, config or rules (one line naming the file and field);
1 a runtime failure. argparse already exits 2 on bad usage.
"""

from __future__ import annotations

import argparse
import sys


def _cmd_broker(args: argparse.Namespace) -> int:
    from appliance.broker.cli import run_broker

    return run_broker(host=args.host, port=args.port, data_dir=args.data_dir)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="appliance", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    broker = sub.add_parser("broker", help="run the embedded Kafka-protocol broker")
    broker.add_argument("--host", default="127.0.0.1")
    broker.add_argument("--port", type=int, default=9092)
    broker.add_argument("--data-dir", default=None, help="durable storage (default: memory)")
    broker.set_defaults(func=_cmd_broker)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
