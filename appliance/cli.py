"""The ``appliance`` command line: the alerting query, its broker, config and rules
checks, and the plugins installed above it.

Each subcommand is a ``Command`` (appliance.command_tree): listed by name and help at
once, its flags defined only when it is chosen, and its heavy modules (pyspark, the
runner, the broker) imported only when it runs; so ``appliance --help`` and ``--version``
answer without them. Subcommands that need more than the appliance (``demo`` the load
generator, ``dashboards`` and ``watch`` the dashboards package) are plugins: entry points
of the group ``appliance.commands`` naming a ``Command``, so the CLI offers them without
the appliance package importing the layers above it.

Exit codes (the README's table has every command's): 0 success; 1 a runtime failure;
2 bad usage, config or rules (one line naming the file and field, or the flag), or a
missing extra; 3 a load test that lost alerts (and ``class-archive path``: no archive
built yet); 130 a finite command interrupted (Ctrl-C). ``run``, ``broker`` and ``watch``
stop on Ctrl-C as they should: 0.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from importlib.metadata import entry_points
from pathlib import Path

from appliance import versions
from appliance.command_tree import (
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    Command,
    LazySubcommands,
    Parser,
    lazy_subcommands,
    subcommands,
)
from appliance.durations import duration_arg, format_seconds
from appliance.extras import MissingExtra, require
from appliance.log_options import LogFormat, add_log_options
from appliance.trigger import DEFAULT as DEFAULT_TRIGGER
from appliance.trigger import TRIGGERS

PLUGIN_GROUP = "appliance.commands"
# Where ``appliance run`` on a terminal writes its full log (the terminal gets a short
# view): with the appliance's other state, next to its checkpoint directory.
RUN_LOG_FILE = "log/appliance.log"
FALLBACK_LOG_DIR = "var"  # a checkpoint that is not a local path (hdfs://, s3a://...)
RELOAD_TIMEOUT_S = 180.0

EXIT_CODES = """exit codes:
  0    success
  1    a runtime failure (what the command needed did not work)
  2    bad usage, config or rules (one line names the flag, or the file and key),
       or a missing extra (pip install 'appliance[tools]')
  3    a load test that lost alerts; class-archive path: no archive built yet
  130  interrupted (Ctrl-C) before a finite command ended; run, broker and watch
       stop cleanly on Ctrl-C and exit 0"""


def examples(*lines: str) -> str:
    """An epilog of example command lines."""
    return "examples:\n" + "\n".join(f"  {line}" for line in lines)


def _fail(lines: str) -> int:
    for line in lines.splitlines():
        print(line, file=sys.stderr)
    return EXIT_USAGE


# --- run --------------------------------------------------------------------------------

def _overrides(args: argparse.Namespace) -> list:
    """``--conf`` and ``--bootstrap-server`` as config overrides (OverrideError on a bad
    ``--conf``)."""
    from appliance.overrides import Override, from_conf

    overrides = from_conf(args.conf)
    if getattr(args, "bootstrap_server", None):
        overrides.append(Override("kafka", "bootstrap_servers", args.bootstrap_server,
                                  "--bootstrap-server"))
    return overrides


def _cmd_run(args: argparse.Namespace) -> int:
    from appliance import logs
    from appliance.config import ConfigError, load_config
    from appliance.overrides import OverrideError
    from appliance.process.rules_check import WAIT_S, RulesCheck
    from appliance.rules.rules_file import RulesError

    rule_set = rules_check = None
    try:
        config = load_config(args.config, trigger=args.trigger, conf=_overrides(args))
        # Read and checked once: a file checked within WAIT_S (every small one) here, so
        # its errors exit 2 before anything starts; a large file's check goes on while the
        # broker and Spark start, and the start takes its verdict (the same lines, exit 2).
        # Either way the appliance runs this rule set without reading the file again.
        rules_check = RulesCheck(config.rules.path)
        if rules_check.done(WAIT_S):
            rule_set, rules_check = rules_check.result(), None
    except (ConfigError, RulesError, OverrideError) as exc:
        return _fail(str(exc))
    try:
        output = logs.configure_from_args(args, str(run_log_file(config.query.checkpoint_dir)))
    except logs.LogFileError as exc:
        return _fail(str(exc))
    from appliance.process.runner import run

    on_ready = None
    if output.format is LogFormat.CONSOLE:
        def on_ready(appliance) -> None:
            from appliance.process.ready_banner import metrics_url, ready_line

            metrics = metrics_url(appliance.config.metrics.host, appliance.metrics_port)
            embedded = appliance.kafka is not None and appliance.kafka.broker is not None
            print(ready_line(appliance.bootstrap, embedded,
                             appliance.config.topics, metrics, output.file), flush=True)

    return run(config, on_ready=on_ready, rule_set=rule_set, rules_check=rules_check)


def run_log_file(checkpoint_dir: str) -> Path:
    """``log/appliance.log`` beside the checkpoint directory (``var/log/appliance.log``
    for the default and the example config's ``var/checkpoints``)."""
    local = "://" not in checkpoint_dir and not checkpoint_dir.startswith("file:")
    state = Path(checkpoint_dir).parent if local else Path(FALLBACK_LOG_DIR)
    path = Path(os.path.normpath(os.path.abspath(state / RUN_LOG_FILE)))
    return path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path


def _config_overrides(parser: argparse.ArgumentParser) -> None:
    """The settings that win over the file and the environment (``run``, ``config check``)."""
    parser.add_argument("--trigger", choices=TRIGGERS, default=None,
                        help="override [query] trigger")
    parser.add_argument("--bootstrap-server", default=None, metavar="HOST:PORT[,...]",
                        help="the Kafka to use: override [kafka] bootstrap_servers (unset "
                             "in the file and here: the embedded broker starts)")
    parser.add_argument("--conf", action="append", default=[], metavar="spark.KEY=VALUE",
                        help="a Spark setting, as spark-submit's --conf (repeatable); wins "
                             "over the config file and the environment")


def _build_run(run: argparse.ArgumentParser) -> None:
    run.description = (
        "Run the alerting query until SIGTERM or SIGINT (Ctrl-C), then stop cleanly (exit "
        "0). Without [kafka] bootstrap_servers it starts the embedded broker on "
        "127.0.0.1:9092. Prometheus metrics on [metrics] port (9464); SIGHUP re-reads the "
        "rules. Every key of the file can be overridden with APPLIANCE_<SECTION>_<KEY>.")
    run.epilog = examples(
        "appliance run --config examples/appliance.toml",
        "appliance run --config appliance.toml --trigger microbatch",
        "appliance run --bootstrap-server kafka-1:9092,kafka-2:9092 --conf "
        "spark.driver.memory=2g",
        "APPLIANCE_QUERY_INTERVAL=500ms appliance run --log-format json")
    run.add_argument("--config", default=None, metavar="FILE",
                     help="TOML config (default: ./appliance.toml if present, else the "
                          "built-in defaults)")
    _config_overrides(run)
    add_log_options(run, f"{RUN_LOG_FILE} beside the checkpoint directory")
    run.set_defaults(func=_cmd_run)


# --- config check -----------------------------------------------------------------------

def _env_file(path: str) -> dict[str, str]:
    """``KEY=VALUE`` lines as systemd's ``EnvironmentFile=`` reads them (comments, blank
    lines, optional quotes); ValueError naming the file and line."""
    out: dict[str, str] = {}
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ValueError(f"--env-file {path}: cannot read it ({exc.strerror})") from None
    for number, line in enumerate(lines, 1):
        text = line.strip()
        if not text or text.startswith(("#", ";")):
            continue
        name, sep, value = text.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"--env-file {path}:{number}: want NAME=VALUE")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        out[name.strip()] = value
    return out


def _cmd_config_check(args: argparse.Namespace) -> int:
    from appliance.config import Problem, check_config
    from appliance.overrides import OverrideError
    from appliance.rules.rules_file import RulesError, load_rules

    stdin = args.file == "-"
    label = args.label or ("<stdin>" if stdin else args.file)
    try:
        overrides = _overrides(args)
        environ = _env_file(args.env_file) if args.env_file else dict(os.environ)
    except (OverrideError, ValueError) as exc:
        return _fail(str(exc))
    print(f"Checking {label}")
    config, problems = check_config(None if stdin else args.file, environ, args.trigger,
                                    overrides, text=sys.stdin.read() if stdin else None,
                                    label=label)
    rules = ""
    if config is not None and args.rules:
        try:
            rules = f", rules {config.rules.path} ({len(load_rules(config.rules.path))})"
        except RulesError as exc:
            problems = [Problem(label, "rules.path", line)
                        for line in str(exc).splitlines()]
    if problems:
        print(f"  FAILED: {len(problems)} problem{'s' if len(problems) > 1 else ''}")
        for problem in problems:
            print(problem.line(env_hint=True), file=sys.stderr)
        return EXIT_USAGE
    assert config is not None
    kafka = config.kafka.bootstrap_servers or "the embedded broker"
    print(f"  SUCCESS: {label} is a valid appliance config (Kafka {kafka}, trigger "
          f"{config.query.trigger} every {config.query.trigger_interval}{rules})")
    return 0


def _build_config(config: argparse.ArgumentParser) -> None:
    config.description = "Check an appliance config before it is used."
    config.epilog = examples("appliance config check /etc/appliance/appliance.toml")
    sub = config.add_subparsers(dest="config_command", required=True, metavar="COMMAND")
    check = sub.add_parser(
        "check", help="check the whole config, listing every problem (exit 0 or 2)",
        description=(
            "Check an appliance config as `appliance run` would read it, without starting "
            "anything: every section, with the APPLIANCE_<SECTION>_<KEY> variables and "
            "the flags below applied, and the rules file it names. Every problem is "
            "listed on stderr with the file, the key and the variable that sets it; exit "
            "0 when there is none, 2 otherwise (like `promtool check config`)."),
        epilog=examples(
            "appliance config check examples/appliance.toml",
            "appliance config check appliance.toml --env-file /etc/appliance/appliance.env",
            "render-config | appliance config check - --label appliance.toml --no-rules"))
    check.add_argument("file", metavar="FILE",
                       help="the TOML config; - reads it from stdin (relative paths in it "
                            "are then relative to the working directory)")
    _config_overrides(check)
    check.add_argument("--env-file", default=None, metavar="FILE",
                       help="take the APPLIANCE_* variables from this file (systemd "
                            "EnvironmentFile= syntax) instead of this shell's: the "
                            "service's own environment")
    check.add_argument("--no-rules", dest="rules", action="store_false",
                       help="do not load the rules file [rules] path names (a config "
                            "checked away from the host it is for)")
    check.add_argument("--label", default=None, metavar="NAME",
                       help="the name problems give the file (default: FILE, or <stdin>)")
    check.set_defaults(func=_cmd_config_check)


# --- rules ------------------------------------------------------------------------------

def _cmd_rules_check(args: argparse.Namespace) -> int:
    from appliance.rules.rules_file import RulesError, load_rule_set

    started = time.monotonic()
    try:
        rule_set = load_rule_set(args.file)
        if args.spark:
            _spark_check(rule_set)
    except RulesError as exc:
        return _fail(str(exc))
    checked = "checked, and compiled by Spark" if args.spark else "checked"
    print(f"{args.file}: OK, {len(rule_set)} rules {checked} in "
          f"{time.monotonic() - started:.2f} s")
    return 0


def _spark_check(rule_set) -> None:
    """Compile ``rule_set`` as the running appliance does, in a local Spark with its SQL
    settings (ANSI mode off...): a JVM start, then one analysis of every rule."""
    from pyspark.sql import SparkSession

    from appliance.connector import jars
    from appliance.rules.rule_book import compile_rules
    from appliance.tuning import sql_settings, tuning_for

    builder = (SparkSession.builder.master("local[1]").appName("rules-check")
               .config("spark.ui.enabled", "false")
               .config("spark.jars", ",".join(str(j) for j in jars())))
    for key, value in sql_settings(tuning_for(DEFAULT_TRIGGER).spark_conf).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    try:
        compile_rules(spark, rule_set)
    finally:
        spark.stop()


def _ask_running(command: str, args: argparse.Namespace, path: str,
                 ask: Callable[[str], int]) -> int:
    """Find the running appliance's page ``path`` (``--url``, else from ``--config``'s
    ``[metrics]``) and ``ask(url)`` it; the exit code. One way to fail for every such
    command: a bad config exits 2 naming the key, an appliance that cannot be asked or
    does not answer exits 1 with one line ``<command>: <why>``."""
    from appliance.config import ConfigError, load_config
    from appliance.process.reload_client import ReloadClientError, status_url

    try:
        url = args.url or status_url(load_config(args.config), path)
    except ConfigError as exc:
        return _fail(str(exc))
    except ReloadClientError as exc:
        print(f"{command}: {exc}", file=sys.stderr)
        return 1
    try:
        return ask(url)
    except ReloadClientError as exc:
        print(f"{command}: {exc}", file=sys.stderr)
        return 1


def _cmd_rules_reload(args: argparse.Namespace) -> int:
    from appliance.process.reload_client import reload
    from appliance.process.reload_status import STATUS_PATH

    def ask(url: str) -> int:
        answer = reload(url, pid=args.pid, timeout_s=args.timeout)
        print(answer.line, file=sys.stdout if answer.exit_code == 0 else sys.stderr)
        return answer.exit_code

    return _ask_running("rules reload", args, STATUS_PATH, ask)


def _cmd_rules_stats(args: argparse.Namespace) -> int:
    from appliance.process.reload_client import read_page
    from appliance.rules.book_stats import PAGE_PATH, BookStats, report

    def ask(url: str) -> int:
        page = read_page(url)
        if args.json:
            print(json.dumps(page, indent=2))
        else:
            print(report(BookStats.from_page(page), args.top))
        return 0

    return _ask_running("rules stats", args, PAGE_PATH, ask)


def _build_rules(rules: argparse.ArgumentParser) -> None:
    rules.description = "Check alert rules, or swap the running appliance's rules live."
    rules.epilog = examples("appliance rules check rules.yml",
                            "appliance rules reload --config /etc/appliance/appliance.toml",
                            "appliance rules stats --top 20")
    sub = rules.add_subparsers(dest="rules_command", required=True, metavar="COMMAND")
    check = sub.add_parser(
        "check", help="validate a rules file, report every problem (exit 0 or 2)",
        description=(
            "Validate a rules file with the running appliance's verdicts, without a JVM "
            "(milliseconds per thousand rules): the file's structure, ids and severities, "
            "and each 'when' read and type-checked as Spark's analyzer does it (fields, "
            "functions and their argument counts, types, aggregates, subqueries, "
            "determinism). --spark also compiles them with Spark itself, as the running "
            "appliance does at start-up and reload (a local JVM, several seconds). Every "
            "problem is one line naming the file and the rule id; exit 0 valid, 2 not."),
        epilog=examples("appliance rules check examples/rules.yml",
                        "appliance rules check rules.yml --spark"))
    check.add_argument("file", metavar="FILE", help="the YAML rules file")
    check.add_argument("--spark", dest="spark", action="store_true",
                       help="also compile the rules with a local Spark (several seconds)")
    check.add_argument("--no-spark", dest="spark", action="store_false",
                       help=argparse.SUPPRESS)  # the default now; kept for old scripts
    check.set_defaults(func=_cmd_rules_check)
    reload_cmd = sub.add_parser(
        "reload", help="make the running appliance re-read [rules] path and swap its rules "
                       "live (exit 0 applied or unchanged, 2 rejected, 1 failed)",
        description=(
            "Make the running appliance re-read [rules] path and swap its rules live, as "
            "SIGHUP does, and wait for the outcome: exit 0 applied or unchanged, 2 the new "
            "file was rejected (nothing changed), 1 the appliance could not be reached or "
            "did not answer in time."),
        epilog=examples("appliance rules reload --config /etc/appliance/appliance.toml",
                        "appliance rules reload --url http://127.0.0.1:9464/-/rules "
                        "--timeout 1m"))
    reload_cmd.add_argument("--config", default=None, metavar="FILE",
                            help="the appliance's TOML config: its [metrics] endpoint finds "
                                 "the running appliance (default: ./appliance.toml)")
    reload_cmd.add_argument("--url", default=None,
                            help="the running appliance's status page instead "
                                 "(http://HOST:PORT/-/rules; default: from --config)")
    reload_cmd.add_argument("--pid", type=int, default=None,
                            help="refuse unless that process answers (systemd: $MAINPID)")
    reload_cmd.add_argument("--timeout", type=duration_arg(allow_zero=False),
                            default=RELOAD_TIMEOUT_S, metavar="DURATION",
                            help=f"how long to wait for the outcome (default "
                                 f"{format_seconds(RELOAD_TIMEOUT_S)})")
    reload_cmd.set_defaults(func=_cmd_rules_reload)
    stats = sub.add_parser(
        "stats", help="per-rule counts of the running appliance: top rules by alerts, rules "
                      "that never matched or that no event reached (exit 0, 1 unreachable)",
        description=(
            "Read the running appliance's per-rule counts since it started (its "
            "/-/rules/stats page): the rules that alerted most, those that never matched, "
            "and those no event reached (the index never saw the value they require, e.g. "
            "a metric name nobody sends). Exit 0; 1 when no appliance answers."),
        epilog=examples("appliance rules stats --config /etc/appliance/appliance.toml",
                        "appliance rules stats --top 50 --json"))
    stats.add_argument("--config", default=None, metavar="FILE",
                       help="the appliance's TOML config: its [metrics] endpoint finds the "
                            "running appliance (default: ./appliance.toml)")
    stats.add_argument("--url", default=None,
                       help="the running appliance's stats page instead "
                            "(http://HOST:PORT/-/rules/stats)")
    stats.add_argument("--top", type=int, default=10, metavar="N",
                       help="how many of the top rules to list (default 10)")
    stats.add_argument("--json", action="store_true",
                       help="print the page as JSON (every rule's counts)")
    stats.set_defaults(func=_cmd_rules_stats)


# --- class-archive ----------------------------------------------------------------------

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


def _build_class_archive(archive: argparse.ArgumentParser) -> None:
    archive.description = (
        "The driver JVM's class-data-sharing archive: Spark's classes recorded once, "
        "mapped by every later start (faster starts; docs/appliance.md).")
    archive.epilog = examples("appliance class-archive build --if-missing",
                              "appliance class-archive path",
                              "appliance class-archive prune --dry-run")
    sub = archive.add_subparsers(dest="archive_command", required=True, metavar="COMMAND")
    build = sub.add_parser(
        "build", help="start the appliance once and record its classes (about a minute)",
        description="Start the appliance once and record its classes (about a minute); "
                    "exit 0 written or already there with --if-missing, 1 failed.",
        epilog=examples("appliance class-archive build --if-missing"))
    build.add_argument("--path", default=None,
                       help="where to write it (default: what [spark] class_archive = "
                            '"auto" uses, see `appliance class-archive path`)')
    build.add_argument("--if-missing", action="store_true",
                       help="do nothing if the archive is already there")
    build.set_defaults(func=_cmd_class_archive_build)
    path = sub.add_parser(
        "path", help='print where "auto" looks (exit 0 if built, 3 if not built yet)',
        description='Print where [spark] class_archive = "auto" looks for this machine\'s '
                    "archive: exit 0 if it is built, 3 if not yet (the path is printed "
                    "either way), 1 if there is no java or no pyspark.",
        epilog=examples("appliance class-archive path || appliance class-archive build"))
    path.set_defaults(func=_cmd_class_archive_path)
    prune_cmd = sub.add_parser(
        "prune", help="remove the archives whose JDK or Spark installation is gone or changed",
        description="Remove the archives whose JDK or Spark installation is gone or "
                    "changed; exit 0.",
        epilog=examples("appliance class-archive prune --dry-run"))
    prune_cmd.add_argument("--dry-run", action="store_true",
                           help="only say what would be removed")
    prune_cmd.set_defaults(func=_cmd_class_archive_prune)


# --- ha -----------------------------------------------------------------------------------
HANDOVER_TIMEOUT_S = 180.0


def _cmd_ha_handover(args: argparse.Namespace) -> int:
    from appliance.config import ConfigError, load_config
    from appliance.ha.handover import HandoverError, hand_over

    try:
        config = load_config(args.config)
    except ConfigError as exc:
        return _fail(str(exc))
    if config.ha.group is None:
        return _fail(f"{args.config or 'appliance.toml'}: ha.group: not set: the config "
                     f"names no pair to hand over")
    try:
        done = hand_over(config, config.ha.group, args.timeout)
    except HandoverError as exc:
        print(f"ha handover: {exc}", file=sys.stderr)
        return 1
    print(f"ha handover: {done.to} serves group {done.group} ({done.seconds:g} s after "
          f"the request)")
    return 0


def _build_ha(ha: argparse.ArgumentParser) -> None:
    ha.description = ("An active/standby pair ([ha] group): ask its active instance to hand "
                      "over to the standby (docs/operations.md).")
    ha.epilog = examples("appliance ha handover --config /etc/appliance/appliance.toml")
    sub = ha.add_subparsers(dest="ha_command", required=True, metavar="COMMAND")
    handover = sub.add_parser(
        "handover", help="the pair's active instance hands over to its standby and becomes "
                         "the standby (exit 0 handed over, 1 not, 2 bad config)",
        description=(
            "Ask the active instance of the config's pair ([ha] group) to hand over: the "
            "standby is elected and starts its query, the old active stops its own once "
            "the new one serves and waits warm as the standby. Refused (exit 1) when the "
            "group has no standby. Waits until the new active says it serves."),
        epilog=examples("appliance ha handover --config /etc/appliance/appliance.toml",
                        "appliance ha handover --config appliance.toml --timeout 1m"))
    handover.add_argument("--config", default=None, metavar="FILE",
                          help="an instance's TOML config: its [ha] group and [kafka] "
                               "cluster (default: ./appliance.toml)")
    handover.add_argument("--timeout", type=duration_arg(allow_zero=False),
                          default=HANDOVER_TIMEOUT_S, metavar="DURATION",
                          help=f"how long to wait for the new active to serve (default "
                               f"{format_seconds(HANDOVER_TIMEOUT_S)})")
    handover.set_defaults(func=_cmd_ha_handover)


# --- the tree ---------------------------------------------------------------------------

COMMANDS = (
    Command("run", "run the alerting query until SIGTERM/SIGINT", _build_run),
    Command("broker", "run the embedded Kafka-protocol broker in the foreground",
            "appliance.broker.cli:add_broker_options"),
    Command("broker-user", "the embedded broker's users and ACLs (its files, offline)",
            "appliance.broker.users_cli:build"),
    Command("config", "check an appliance.toml: every problem, with file, key and env var",
            _build_config),
    Command("rules", "check alert rules; swap the running appliance's rules live",
            _build_rules),
    Command("class-archive", "the driver JVM's class-data-sharing archive (faster starts)",
            _build_class_archive),
    Command("ha", "an active/standby pair: hand over to the standby", _build_ha),
)


def plugins() -> list[Command]:
    """The installed ``appliance.commands`` entry points, each a ``Command``."""
    found = []
    for plugin in sorted(entry_points(group=PLUGIN_GROUP), key=lambda ep: ep.name):
        command = plugin.load()
        if not isinstance(command, Command) or command.name != plugin.name:
            raise TypeError(f"entry point {plugin.name} = {plugin.value}: want a Command "
                            f"named {plugin.name!r}")
        found.append(command)
    return found


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="appliance",
        description="The low-latency Kafka alerting appliance on Apache Spark: run its "
                    "query and its broker, check configs and rules, watch it, load it.",
        epilog=examples("appliance run --config examples/appliance.toml",
                        "appliance demo --duration 60s --rate 2000",
                        "appliance config check appliance.toml",
                        "appliance rules check rules.yml",
                        "appliance watch",
                        "appliance COMMAND --help") + "\n\n" + EXIT_CODES)
    parser.add_argument("--version", action="store_true",
                        help="print the versions of the appliance, Spark, kafka-clients, "
                             "the Python Kafka clients, Python and Java, and exit")
    parser.add_argument("--verbose", action="store_true",
                        help="with --version: also run `java -version` (starts a JVM)")
    sub = lazy_subcommands(parser, dest="command", metavar="COMMAND")
    for command in (*COMMANDS, *plugins()):
        sub.add_command(command)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.version:
        print(versions.report(verbose=args.verbose))
        return 0
    if args.command is None:
        parser.error("name a command (appliance --help lists them)")
    action = subcommands(parser)
    assert isinstance(action, LazySubcommands)
    chosen = action.commands[args.command]
    try:
        if chosen.extra is not None:
            require(chosen.extra, f"appliance {args.command}")
        return args.func(args)
    except MissingExtra as exc:
        return _fail(str(exc))
    except KeyboardInterrupt:
        print(f"appliance {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
