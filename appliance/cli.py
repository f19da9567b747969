"""The ``appliance`` command line: ``run``, ``broker``, ``rules check|reload`` and
``class-archive``, plus plugins.

Exit codes: 0 success; 2 bad usage, config or rules (one line naming the file and field);
1 a runtime failure. argparse already exits 2 on bad usage.

Commands that need more than the appliance (``demo`` needs the load generator,
``dashboards`` the dashboards package) are plugins: each installed entry point of the
group ``appliance.commands`` names a ``register(subparsers)`` that adds its subcommand.
So the CLI offers them without the appliance package importing the layers above it.

Heavy modules (pyspark, the runner) are imported inside the command that needs them, so
``appliance --help`` and ``appliance rules check --no-spark`` answer without them.
"""

from __future__ import annotations

import argparse
import os
import sys
from importlib.metadata import entry_points
from pathlib import Path

from appliance import __version__, logs
from appliance.broker.cli import add_broker_options
from appliance.trigger import DEFAULT as DEFAULT_TRIGGER
from appliance.trigger import TRIGGERS

PLUGIN_GROUP = "appliance.commands"
# Where ``appliance run`` on a terminal writes its full log (the terminal gets a short
# view): with the appliance's other state, next to its checkpoint directory.
RUN_LOG_FILE = "log/appliance.log"
FALLBACK_LOG_DIR = "var"  # a checkpoint that is not a local path (hdfs://, s3a://...)


def _fail(lines: str) -> int:
    for line in lines.splitlines():
        print(line, file=sys.stderr)
    return 2


def _cmd_run(args: argparse.Namespace) -> int:
    from appliance.config import ConfigError, load_config
    from appliance.overrides import OverrideError, from_conf
    from appliance.query.rules import RulesError, load_rules

    try:
        config = load_config(args.config, trigger=args.trigger, conf=from_conf(args.conf))
        load_rules(config.rules.path)  # structural rule errors exit 2 before any JVM
    except (ConfigError, RulesError, OverrideError) as exc:
        return _fail(str(exc))
    try:
        output = logs.configure_from_args(args, str(run_log_file(config.query.checkpoint_dir)))
    except logs.LogFileError as exc:
        return _fail(str(exc))
    from appliance.process.runner import run

    on_ready = None
    if output.format is logs.LogFormat.CONSOLE:
        def on_ready(appliance) -> None:
            from appliance.process.ready_banner import metrics_url, ready_line

            metrics = metrics_url(appliance.config.metrics.host, appliance.metrics_port)
            print(ready_line(appliance.bootstrap, appliance.broker is not None,
                             appliance.config.topics, metrics, output.file), flush=True)

    return run(config, on_ready=on_ready)


def run_log_file(checkpoint_dir: str) -> Path:
    """``log/appliance.log`` beside the checkpoint directory (``var/log/appliance.log``
    for the default and the example config's ``var/checkpoints``)."""
    local = "://" not in checkpoint_dir and not checkpoint_dir.startswith("file:")
    state = Path(checkpoint_dir).parent if local else Path(FALLBACK_LOG_DIR)
    path = Path(os.path.normpath(os.path.abspath(state / RUN_LOG_FILE)))
    return path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path


def _cmd_rules_check(args: argparse.Namespace) -> int:
    from appliance.query.rules import RulesError, analyze_rules, load_rules

    try:
        rules = load_rules(args.file)
        if args.spark:
            from pyspark.sql import SparkSession

            from appliance.tuning import tuning_for

            builder = (SparkSession.builder.master("local[1]").appName("rules-check")
                       .config("spark.ui.enabled", "false"))
            # Analyze with the SQL settings the running appliance uses (ANSI mode, ...).
            for key, value in tuning_for(DEFAULT_TRIGGER).spark_conf.items():
                if key.startswith("spark.sql."):
                    builder = builder.config(key, value)
            spark = builder.getOrCreate()
            spark.sparkContext.setLogLevel("ERROR")
            try:
                analyze_rules(spark, rules, args.file)
            finally:
                spark.stop()
    except RulesError as exc:
        return _fail(str(exc))
    checked = "structure and Spark analysis" if args.spark else "structure only"
    print(f"{args.file}: OK, {len(rules)} rules ({checked})")
    return 0


def _cmd_rules_reload(args: argparse.Namespace) -> int:
    from appliance.config import ConfigError, load_config
    from appliance.process.reload_client import ReloadClientError, reload, status_url

    try:
        url = args.url or status_url(load_config(args.config))
    except ConfigError as exc:
        return _fail(str(exc))
    except ReloadClientError as exc:
        print(f"rules reload: {exc}", file=sys.stderr)
        return 1
    try:
        answer = reload(url, pid=args.pid, timeout_s=args.timeout)
    except ReloadClientError as exc:
        print(f"rules reload: {exc}", file=sys.stderr)
        return 1
    print(answer.line, file=sys.stdout if answer.exit_code == 0 else sys.stderr)
    return answer.exit_code


def _cmd_class_archive_build(args: argparse.Namespace) -> int:
    from appliance.process.class_archive import default_archive, record_path
    from appliance.process.class_archive_build import ArchiveBuildError, build, write_record

    target = Path(args.path) if args.path else default_archive()
    if args.if_missing and target is not None and target.is_file():
        if args.path is None and not record_path(target).is_file():
            write_record(target)  # built before records were kept: its name is our key
        print(f"class-archive: {target} is there (without --if-missing: rebuild)", file=sys.stderr)
        return 0
    try:
        build(target, progress=lambda line: print(line, file=sys.stderr, flush=True))
    except ArchiveBuildError as exc:
        print(f"class-archive: {str(exc).splitlines()[0]}", file=sys.stderr)
        rest = str(exc).splitlines()[1:]
        if rest:
            print("\n".join(rest), file=sys.stderr)
        return 1
    return 0


def _cmd_class_archive_path(args: argparse.Namespace) -> int:
    from appliance.process.class_archive import default_archive

    target = default_archive()
    if target is None:
        print("class-archive: no java (JAVA_HOME or PATH) or no pyspark", file=sys.stderr)
        return 1
    print(target)
    return 0 if target.is_file() else 3


def _cmd_class_archive_prune(args: argparse.Namespace) -> int:
    from appliance.process.class_archive import archive_dir
    from appliance.process.class_archive_prune import prune

    directory = archive_dir()
    verdicts = prune(directory, dry_run=args.dry_run) if directory.is_dir() else []
    for verdict in verdicts:
        action = ("would remove" if args.dry_run else "removed") if verdict.removed else "kept"
        print(f"class-archive: {action} {verdict.archive}: {verdict.reason}")
    if not verdicts:
        print(f"class-archive: no archives in {directory}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="appliance", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"appliance {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run the alerting query until SIGTERM/SIGINT")
    run.add_argument("--config", default=None,
                     help="TOML config (default: ./appliance.toml if present, else defaults)")
    run.add_argument("--trigger", choices=TRIGGERS, default=None,
                     help="override [query] trigger")
    run.add_argument("--conf", action="append", default=[], metavar="spark.KEY=VALUE",
                     help="a Spark setting, as spark-submit's --conf (repeatable); wins "
                          "over the config file and the environment")
    logs.add_log_options(run, f"{RUN_LOG_FILE} beside the checkpoint directory")
    run.set_defaults(func=_cmd_run)

    broker = sub.add_parser("broker", help="run the embedded Kafka-protocol broker")
    add_broker_options(broker)  # flags documented in appliance/broker/cli.py

    rules = sub.add_parser("rules", help="alert rules tools")
    rules_sub = rules.add_subparsers(dest="rules_command", required=True)
    check = rules_sub.add_parser("check", help="validate a rules file, report every problem")
    check.add_argument("file")
    check.add_argument("--no-spark", dest="spark", action="store_false",
                       help="structural checks only (no JVM; skips type/function checks)")
    check.set_defaults(func=_cmd_rules_check)
    reload_cmd = rules_sub.add_parser(
        "reload", help="make the running appliance re-read [rules] path and swap its rules "
                       "live (exit 0 applied or unchanged, 2 rejected, 1 failed)")
    reload_cmd.add_argument("--config", default=None,
                            help="the appliance's TOML config: its [metrics] endpoint finds "
                                 "the running appliance (default: ./appliance.toml)")
    reload_cmd.add_argument("--url", default=None,
                            help="the running appliance's status page instead "
                                 "(http://HOST:PORT/-/rules)")
    reload_cmd.add_argument("--pid", type=int, default=None,
                            help="refuse unless that process answers (systemd: $MAINPID)")
    reload_cmd.add_argument("--timeout", type=float, default=180.0,
                            help="seconds to wait for the outcome (default 180)")
    reload_cmd.set_defaults(func=_cmd_rules_reload)

    archive = sub.add_parser(
        "class-archive", help="the driver JVM's class-data-sharing archive (faster starts)")
    archive_sub = archive.add_subparsers(dest="archive_command", required=True)
    build = archive_sub.add_parser(
        "build", help="start the appliance once and record its classes (about a minute)")
    build.add_argument("--path", default=None,
                       help="where to write it (default: what [spark] class_archive = "
                            '"auto" uses, see `appliance class-archive path`)')
    build.add_argument("--if-missing", action="store_true",
                       help="do nothing if the archive is already there")
    build.set_defaults(func=_cmd_class_archive_build)
    path = archive_sub.add_parser(
        "path", help='print where "auto" looks (exit 0 if built, 3 if not built yet)')
    path.set_defaults(func=_cmd_class_archive_path)
    prune_cmd = archive_sub.add_parser(
        "prune", help="remove the archives whose JDK or Spark installation is gone or changed")
    prune_cmd.add_argument("--dry-run", action="store_true",
                           help="only say what would be removed")
    prune_cmd.set_defaults(func=_cmd_class_archive_prune)

    for plugin in sorted(entry_points(group=PLUGIN_GROUP), key=lambda ep: ep.name):
        plugin.load()(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
