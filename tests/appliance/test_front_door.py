"""The front door, as a new user meets it: every command's help (complete, plain, with
defaults and examples), ``--version``, one flag vocabulary with the old spellings still
working, one duration syntax, flag errors that name the flag and exit 2, and the README's
exit-code table held to the command tree. None of this starts a JVM."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from importlib.metadata import version
from pathlib import Path

import pytest

from appliance import __version__, cli
from appliance.command_tree import walk
from appliance.durations import parse_ms, parse_seconds, spark_interval
from appliance.jdk import java_binary, release_version
from loadgen import cli as loadgen_cli
from loadgen.locust_flags import DEFAULT_ALERT_TIMEOUT, FLAG_NAMES

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
# What `appliance --help` must not import: each costs from tens of ms to seconds.
HEAVY = ("matplotlib", "numpy", "grafana_client", "pyspark", "py4j", "locust", "gevent",
         "confluent_kafka", "structlog", "pydantic", "yaml", "sqlglot", "appliance.broker",
         "appliance.config", "appliance.process", "loadgen.demo", "dashboards.render",
         "dashboards.publish", "dashboards.watch")
HELP_BUDGET_S = 2.0  # generous: measured 0.11-0.13 s on a busy 2-core machine
EXIT_ROW = re.compile(r"^\| `([^`]+)` \| ([0-9, ]+) \|", re.M)



def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("APPLIANCE_")}
    env["PYTHONPATH"] = str(ROOT)
    return env


def _run(*argv: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *argv], capture_output=True, text=True,
                          timeout=timeout, env=_env(), cwd=ROOT)


def _python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, env=_env(), cwd=ROOT)


def _trees() -> list[tuple[str, argparse.ArgumentParser]]:
    return [("appliance", cli.build_parser()), ("loadgen", loadgen_cli.build_parser())]


def _leaves() -> dict[str, argparse.ArgumentParser]:
    """Every runnable command by its full name (``appliance broker-user acl add``)."""
    out = {}
    for prog, root in _trees():
        for path, parser in walk(root):
            if path and not any(isinstance(a, argparse._SubParsersAction)
                                for a in parser._actions):
                out[" ".join((prog, *path))] = parser
    return out


# --- help and version --------------------------------------------------------------------

def test_help_and_version_answer_within_budget_without_heavy_modules():
    for argv in (["--help"], ["--version"]):
        started = time.monotonic()
        result = _run("appliance", *argv)
        took = time.monotonic() - started
        assert result.returncode == 0, result.stderr
        assert took < HELP_BUDGET_S, f"appliance {argv[0]} took {took:.2f} s"
    probe = _python("import sys; from appliance import cli; p = cli.build_parser(); "
                       "p.format_help(); print('\\n'.join(sorted(sys.modules)))")
    assert probe.returncode == 0, probe.stderr
    loaded = set(probe.stdout.split())
    heavy = sorted(m for m in loaded if any(m == h or m.startswith(f"{h}.") for h in HEAVY))
    assert not heavy, heavy


def test_version_names_appliance_spark_kafka_clients_python_and_java():
    result = _run("appliance", "--version")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"appliance {__version__}"
    assert f"Spark: {version('pyspark')} (pyspark)" in lines
    assert "kafka-clients: 3.9.1 (the connector's Java Kafka client)" in lines
    assert f"Python: {sys.version.split()[0]} (CPython)" in lines
    java = java_binary()
    assert java is not None and release_version(java) is not None
    assert f"Java: {release_version(java)} ({java})" in lines
    assert f"kafka-python: {version('kafka-python')} (the appliance's admin and offsets " \
           f"client)" in lines
    assert f"confluent-kafka: {version('confluent-kafka')} (the load generator's clients)" \
        in lines
    assert len(lines) == 7  # no JVM started: `java -version` only with --verbose
    verbose = _run("appliance", "--version", "--verbose")
    assert verbose.returncode == 0 and "openjdk version" in verbose.stdout.lower()


def test_loadgen_help_is_quick_and_version_names_the_kafka_clients():
    """Issue 52: ``loadgen --help`` took 0.53 s (pydantic and the broker imported for the
    topic names' defaults); ``--version`` left out the clients that decide behaviour."""
    started = time.monotonic()
    result = _run("loadgen", "--help")
    took = time.monotonic() - started
    assert result.returncode == 0 and took < HELP_BUDGET_S, (result.stderr, took)
    probe = _python("import sys; from loadgen import cli; cli.build_parser().format_help(); "
                    "print('\\n'.join(sorted(sys.modules)))")
    assert probe.returncode == 0, probe.stderr
    loaded = set(probe.stdout.split())
    heavy = sorted(m for m in loaded if any(m == h or m.startswith(f"{h}.")
                                            for h in (*HEAVY, "importlib.metadata")))
    assert not heavy, heavy
    lines = _run("loadgen", "--version").stdout.splitlines()
    import confluent_kafka

    assert lines == [
        f"loadgen {__version__}",
        f"kafka-python: {version('kafka-python')} (the appliance's admin and offsets client)",
        f"confluent-kafka: {version('confluent-kafka')}, librdkafka "
        f"{confluent_kafka.libversion()[0]} (the load generator's clients)"]


def test_locusts_help_through_the_launcher_lists_the_project_flags():
    """Locust prints --help before it loads a locustfile: ``python -m
    loadgen.locust_cli`` loads the flags first, so its help lists all five. (Not imported
    from loadgen.locust_args: importing Locust here would monkey-patch this pytest worker
    with gevent: the names come from the Locust-free loadgen.locust_flags.)"""
    result = _run("loadgen.locust_cli", "--help")
    assert result.returncode == 0, result.stderr
    shown = set(re.findall(r"(?:^\s+|, )(--[a-z-]+)", result.stdout, re.M))
    assert set(FLAG_NAMES) <= shown, set(FLAG_NAMES) - shown
    assert {"--headless", "--users", "--run-time"} <= shown  # Locust's own, as before


def test_the_deploy_teaches_bootstrap_server():
    """The deploy's docs and the loadgen.toml it writes onto hosts said ``--bootstrap``."""
    old = re.compile(r"--bootstrap(?![-\w])")
    found = [f"{path.relative_to(ROOT)}:{number}"
             for path in sorted((ROOT / "ansible").rglob("*")) if path.is_file()
             and path.suffix in (".j2", ".yml", ".md", ".yaml")
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if old.search(line)]
    assert found == []


def test_every_command_has_plain_help_with_examples_and_defaults():
    for prog, root in _trees():
        for path, parser in walk(root):
            name = " ".join((prog, *path))
            text = parser.format_help()
            assert parser.epilog and "examples:" in parser.epilog, name
            assert parser.description, name
            for markup in (r"``", r":class:", r":func:", r"^\s*\.\. \w"):  # RST
                assert not re.search(markup, text, re.M), (name, markup)
            for action in parser._actions:
                if not action.option_strings or action.help == argparse.SUPPRESS:
                    continue
                assert action.help, (name, action.option_strings)
                shown = action.default not in (None, False, (), [], {}, "", argparse.SUPPRESS)
                if shown and action.nargs != 0:
                    assert "default" in parser._get_formatter()._format_action(action), \
                        (name, action.option_strings)


def test_help_of_a_command_shows_its_flags_defaults_and_examples():
    result = _run("appliance", "watch", "--help")
    assert result.returncode == 0, result.stderr
    assert "--prometheus-port PROMETHEUS_PORT" in result.stdout
    assert "(default: 9090)" in result.stdout
    assert "examples:\n  appliance watch\n" in result.stdout


# --- one vocabulary ------------------------------------------------------------------------

def test_kafka_address_is_bootstrap_server_and_old_spellings_still_work():
    parser = loadgen_cli.build_parser()
    base = ["--rate", "10", "--duration", "1"]
    new = parser.parse_args(["run", "--bootstrap-server", "k:9092", *base])
    old = parser.parse_args(["run", "--bootstrap", "k:9092", *base])
    assert new.bootstrap_server == old.bootstrap_server == "k:9092"
    help_text = _leaves()["loadgen run"].format_help()
    assert "--bootstrap-server" in help_text and "--bootstrap " not in help_text
    run = cli.build_parser().parse_args(["run", "--bootstrap-server", "k:9092"])
    assert run.bootstrap_server == "k:9092"
    demo = cli.build_parser().parse_args(["demo", "--seconds", "5"])
    assert demo.duration == 5.0


def test_durations_read_one_way_everywhere():
    for text, ms in (("20s", 20_000), ("5m", 300_000), ("1h", 3_600_000), ("250ms", 250),
                     ("1 second", 1000), ("5 minutes", 300_000), ("20", 20_000),
                     ("1.5", 1500), ("0", 0), ("2 Seconds", 2000)):
        assert parse_ms(text) == ms, text
    for bad in ("soon", "-5s", "5 parsecs", "", "1e3", "nan"):
        with pytest.raises(ValueError, match="must look like"):
            parse_ms(bad)
    assert parse_seconds("5m") == 300.0
    assert [spark_interval(t) for t in ("20s", "1 second", "250ms", "5m", "1.5", "0")] == [
        "20 seconds", "1 second", "250 milliseconds", "5 minutes", "1500 milliseconds",
        "0 seconds"]
    # the CLIs: loadgen, demo, rules reload, dashboards render, watch
    lg = loadgen_cli.build_parser().parse_args(
        ["run", "--bootstrap-server", "k:1", "--rate", "1", "--duration", "2m",
         "--grace", "30s", "--floor-duration", "1 second"])
    assert (lg.duration, lg.grace, lg.floor_duration) == (120.0, 30.0, 1.0)
    parser = cli.build_parser()
    assert parser.parse_args(["rules", "reload", "--timeout", "1m"]).timeout == 60.0
    assert parser.parse_args(["dashboards", "render", "--prometheus", "http://p:9090",
                              "--out", "o", "--range", "5m", "--step", "10"]).range == 300.0
    assert parser.parse_args(["watch", "--scrape-interval", "2s"]).scrape_interval == 2.0


def _duration_flags() -> dict[str, argparse.Action]:
    """Every flag whose name says a unit (``--retention-ms``, ``--offsets-retention-
    minutes``), by ``command flag``."""
    out = {}
    for name, parser in _leaves().items():
        for action in parser._actions:
            for flag in action.option_strings:
                if flag.endswith(("-ms", "-minutes")) and action.help != argparse.SUPPRESS:
                    out[f"{name} {flag}"] = action
    return out


def test_every_flag_named_for_a_unit_takes_a_duration_and_its_old_plain_number():
    """Issue 52: nine broker ``*-ms`` flags, ``--offsets-retention-minutes`` and loadgen's
    ``--behind-ms``, ``--linger-ms``, ``--floor-ms`` took plain numbers only."""
    flags = _duration_flags()
    assert len(flags) >= 13, sorted(flags)
    for name, action in flags.items():
        bare_ms = 60_000 if name.endswith("-minutes") else 1
        assert action.type("2s") == 2000, name
        assert action.type("7d") == 7 * 86_400_000, name
        assert action.type("250ms") == 250, name
        assert action.type("5") == 5 * bare_ms, name  # the old unit, as before
        with pytest.raises(argparse.ArgumentTypeError, match="must look like"):
            action.type("soon")
    broker = cli.build_parser().parse_args(["broker", "--retention-ms", "-1",
                                            "--offsets-retention-minutes", "10080"])
    assert broker.retention_ms == -1 and broker.offsets_retention_ms == 7 * 86_400_000


def test_every_typed_flag_says_what_is_wrong_in_words():
    """argparse shows a type function's own name when it raises anything but
    ArgumentTypeError (``invalid _positive value: 'x'``): an internal name may not show."""
    leaks = []
    for name, parser in _leaves().items():
        for action in parser._actions:
            if not callable(action.type) or not action.option_strings:
                continue
            for text in ("x", "-5", ""):
                try:
                    action.type(text)
                except argparse.ArgumentTypeError:
                    pass
                except (ValueError, TypeError):
                    if action.type.__name__.startswith("_"):
                        leaks.append(f"{name} {action.option_strings[0]} {text!r}: invalid "
                                     f"{action.type.__name__} value")
    assert leaks == []


def test_watch_retention_is_checked_before_prometheus_starts():
    parser = cli.build_parser()
    assert parser.parse_args(["watch", "--retention", "2w"]).retention == 14 * 86_400.0
    for bad in ("1x", "10s", "0"):
        result = _run("appliance", "watch", "--retention", bad, "--prometheus-port", "1")
        assert result.returncode == 2, result.stderr
        assert result.stderr.startswith("appliance watch: error: argument --retention: must")


def test_config_durations_take_the_same_syntax_and_reach_spark_in_its_words(tmp_path):
    from appliance.config import load_config

    path = tmp_path / "appliance.toml"
    path.write_text('[query]\ninterval = "250ms"\nstall_timeout = "2m"\n'
                    '[cpus]\nafter_ready_for = 30\n')
    config = load_config(path, environ={})
    assert config.query.interval == "250ms"  # as the operator wrote it
    assert config.query.trigger_interval == "250 milliseconds"  # what Spark is given
    assert config.query.stall_timeout_s == 120.0
    assert config.cpus.kept_s == 30.0


def test_alert_ratio_defaults_agree_between_loadgen_and_locust():
    from loadgen.config import LoadConfig

    assert loadgen_cli.build_parser().parse_args(
        ["run", "--bootstrap-server", "k:1", "--rate", "1", "--duration", "1"]
    ).alert_ratio == LoadConfig.alert_ratio
    probe = _python("import configargparse, loadgen.locust_args as la; "
                       "p = configargparse.ArgumentParser(); la.add_arguments(p); "
                       "o = p.parse_args([]); print(o.alert_ratio, o.bad_ratio, "
                       "o.alert_timeout)")
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.split() == [str(LoadConfig.alert_ratio), str(LoadConfig.bad_ratio),
                                    DEFAULT_ALERT_TIMEOUT]


@pytest.mark.parametrize("argv, flag", [
    (["loadgen", "run", "--bootstrap-server", "k:1", "--rate", "-5", "--duration", "1"],
     "--rate"),
    (["loadgen", "run", "--bootstrap-server", "k:1", "--rate", "5", "--duration", "soon"],
     "--duration"),
    (["loadgen", "run", "--bootstrap-server", "k:1", "--rate", "5", "--duration", "1",
      "--alert-ratio", "1.5"], "--alert-ratio"),
    (["appliance", "broker", "--port", "-1"], "--port"),
    (["appliance", "demo", "--rate", "0"], "--rate"),
    (["appliance", "watch", "--appliance", "nowhere"], "--appliance"),
])
def test_a_bad_flag_value_exits_2_naming_the_flag(argv, flag):
    result = _run(*argv)
    assert result.returncode == 2, result.stderr
    first = result.stderr.splitlines()[0]
    assert f"error: argument {flag}" in first, result.stderr


# --- exit codes -------------------------------------------------------------------------

def _readme_exit_codes() -> dict[str, set[int]]:
    table = README.read_text(encoding="utf-8").split("## Exit codes", 1)[1]
    return {command: {int(c) for c in codes.split(",")}
            for command, codes in EXIT_ROW.findall(table)}


def test_readme_exit_code_table_lists_every_command_and_usage_is_2():
    documented = _readme_exit_codes()
    leaves = set(_leaves())
    assert leaves | {"locust -f loadgen/locustfile.py"} == set(documented), \
        set(documented) ^ (leaves | {"locust -f loadgen/locustfile.py"})
    for command, codes in documented.items():
        assert {0, 2} <= codes <= {0, 1, 2, 3, 130}, (command, codes)


def test_every_command_exits_2_on_usage_errors(capsys):
    mains = {"appliance": cli.main, "loadgen": loadgen_cli.main}
    for name in sorted(_leaves()):
        prog, *path = name.split()
        with pytest.raises(SystemExit) as stop:
            mains[prog]([*path, "--no-such-flag"])
        assert stop.value.code == 2, name
        # one line naming the flag: the unknown one, or a required argument it lacks
        assert re.search(r"error: (unrecognized arguments: --no-such-flag|the following "
                         r"arguments are required: \S+)", capsys.readouterr().err), name
    for prog, group in (("appliance", []), ("appliance", ["rules"]),
                        ("appliance", ["broker-user", "acl"]), ("loadgen", [])):
        with pytest.raises(SystemExit) as stop:
            mains[prog](group)
        assert stop.value.code == 2, (prog, group)


def test_class_archive_path_exits_3_when_none_is_built(tmp_path):
    env = {**_env(), "APPLIANCE_CLASS_ARCHIVE_DIR": str(tmp_path)}
    result = subprocess.run([sys.executable, "-m", "appliance", "class-archive", "path"],
                            capture_output=True, text=True, timeout=60, env=env, cwd=ROOT)
    assert result.returncode == 3, result.stderr
    assert result.stdout.strip().startswith(str(tmp_path))
    assert _readme_exit_codes()["appliance class-archive path"] == {0, 1, 2, 3}
