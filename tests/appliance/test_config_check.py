"""``appliance config check FILE``: the whole config as ``appliance run`` reads it (file,
``APPLIANCE_<SECTION>_<KEY>`` variables, ``--conf``), every problem on its own line with
the file, the key and the variable that sets it, exit 0 or 2, and neither a JVM nor
pyspark involved."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from appliance.config import check_config
from appliance.overrides import env_key, env_name

ROOT = Path(__file__).resolve().parents[2]


def check(*args: str, env: dict | None = None, stdin: str | None = None,
          cwd: Path = ROOT) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if not k.startswith("APPLIANCE_")}
    full.update(env or {}, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "appliance", "config", "check", *args],
                          capture_output=True, text=True, timeout=60, env=full, cwd=cwd,
                          input=stdin)


def test_the_example_config_is_valid():
    result = check("examples/appliance.toml")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "Checking examples/appliance.toml",
        "  SUCCESS: examples/appliance.toml is a valid appliance config (Kafka the "
        f"embedded broker, trigger continuous every 1 second, rules "
        f"{ROOT / 'examples' / 'rules.yml'} (3))"]
    assert result.stderr == ""


def test_every_problem_is_listed_with_file_key_and_variable(tmp_path):
    config = tmp_path / "appliance.toml"
    config.write_text('[kafka]\nbootstrap_servers = "kafka-1"\n'
                      '[query]\ntrigger = "fast"\ninterval = "soon"\ntypo = 1\n'
                      '[metrics]\nport = 99999\n'
                      '[spark]\nmaster = "local[2]"\n"spark.sql.shuffle.partitions" = 4\n')
    result = check(str(config), "--conf", "spark.driver.port=-1",
                   env={"APPLIANCE_TOPICS_ALERTS": "bad topic"})
    assert result.returncode == 2
    assert result.stdout.splitlines() == [f"Checking {config}", "  FAILED: 7 problems"]
    assert result.stderr.splitlines() == [
        f"{config}: kafka.bootstrap_servers: must be host:port[,host:port...] (got "
        f"'kafka-1') (env: APPLIANCE_KAFKA_BOOTSTRAP_SERVERS)",
        f"{config}: topics.alerts (from APPLIANCE_TOPICS_ALERTS): must be a Kafka topic "
        f"name [A-Za-z0-9._-] (got 'bad topic')",
        f"{config}: query.trigger: must be one of continuous, realtime, microbatch (got "
        f"'fast') (env: APPLIANCE_QUERY_TRIGGER)",
        f"{config}: query.interval: must look like 20s, 5m, 1h, 250ms, '1 second' or "
        f"plain seconds (got 'soon') (env: APPLIANCE_QUERY_INTERVAL)",
        f"{config}: query.typo: unknown key (the keys: trigger, interval, checkpoint_dir, "
        f"starting_offsets, warmup, warmup_batches, async_progress, stall_timeout, "
        f"executor_loss_restarts)",
        f"{config}: spark.driver_port (from --conf spark.driver.port): must be 0..65535, "
        f"0 = any free port (got -1)",
        f"{config}: metrics.port: must be 0..65535, 0 = any free port (got 99999) (env: "
        f"APPLIANCE_METRICS_PORT)",
    ]


def test_the_rules_file_it_names_is_checked_too_unless_told_not_to(tmp_path):
    config = tmp_path / "appliance.toml"
    config.write_text('[rules]\npath = "rules.yml"\n')
    (tmp_path / "rules.yml").write_text(
        'rules:\n  - {id: Bad, severity: loud, when: "value > 1"}\n')
    result = check(str(config))
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"{config}: rules.path: {tmp_path / 'rules.yml'}: rule 'Bad': id: must match "
        f"[a-z0-9][a-z0-9-]* (got 'Bad')",
        f"{config}: rules.path: {tmp_path / 'rules.yml'}: rule 'Bad': severity: must be "
        f"one of info, warning, critical (got 'loud')"]
    assert check(str(config), "--no-rules").returncode == 0


def test_stdin_with_a_label_and_the_services_env_file_instead_of_this_shell(tmp_path):
    """As a deploy checks a rendered file: from stdin, named as it will be installed,
    with the service's environment file and not the caller's variables."""
    env_file = tmp_path / "appliance.env"
    env_file.write_text('# the service\'s EnvironmentFile\nAPPLIANCE_QUERY_TRIGGER="realtime"\n'
                        "APPLIANCE_KAFKA_sasl_password=s3cret-value\n")
    rendered = '[kafka]\nbootstrap_servers = "k:9092"\n[query]\ninterval = "1 second"\n'
    result = check("-", "--label", "appliance.toml (host-1)", "--env-file", str(env_file),
                   "--no-rules", stdin=rendered, env={"APPLIANCE_QUERY_TRIGGER": "continuous"})
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "appliance.toml (host-1): query.interval: the realtime trigger needs at least 5 "
        "seconds (spark.sql.streaming.realTimeMode.minBatchDuration) (got '1 second')"]
    assert "s3cret" not in result.stdout + result.stderr
    ok = check("-", "--no-rules", stdin=rendered)  # this shell's environment: continuous
    assert ok.returncode == 0, ok.stderr


def test_a_file_that_is_not_there_or_not_toml_is_one_problem(tmp_path):
    missing = check(str(tmp_path / "nope.toml"))
    assert missing.returncode == 2
    assert missing.stderr.splitlines() == [f"{tmp_path / 'nope.toml'}: file not found"]
    broken = tmp_path / "broken.toml"
    broken.write_text("[query\n")
    result = check(str(broken))
    assert result.returncode == 2
    [line] = result.stderr.splitlines()
    assert line.startswith(f"{broken}: not valid TOML: ")


def test_run_and_check_agree_on_the_first_problem(tmp_path):
    config = tmp_path / "appliance.toml"
    config.write_text('[query]\ntrigger = "fast"\n[metrics]\nport = -1\n')
    _, problems = check_config(config, environ={})
    assert [p.key for p in problems] == ["query.trigger", "metrics.port"]
    run = subprocess.run([sys.executable, "-m", "appliance", "run", "--config", str(config)],
                         capture_output=True, text=True, timeout=60, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert run.returncode == 2
    assert run.stderr.strip() == problems[0].line()


def test_each_key_names_the_variable_that_reads_back_to_it():
    for section, key, passthrough, name in (
            ("query", "trigger", False, "APPLIANCE_QUERY_TRIGGER"),
            ("kafka", "security.protocol", True, "APPLIANCE_KAFKA_SECURITY_PROTOCOL"),
            ("source", "maxOffsetsPerTrigger", True, "APPLIANCE_SOURCE_maxOffsetsPerTrigger"),
            ("spark", "spark.executorEnv.JAVA_HOME", True,
             "APPLIANCE_SPARK_spark_executorEnv_JAVA__HOME")):
        assert env_name(section, key, passthrough) == name
        if passthrough:
            assert env_key(name.split("_", 2)[2]) == key


def test_no_jvm_and_no_spark_module_is_involved():
    code = ("import sys\nfrom appliance.cli import main\n"
            "code = main(['config', 'check', 'examples/appliance.toml'])\n"
            "print('pyspark' in sys.modules or 'py4j' in sys.modules, code)\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("APPLIANCE_")}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=60, env={**env, "PYTHONPATH": str(ROOT)}, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "False 0"
