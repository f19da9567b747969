"""Config: defaults, file values, env overrides, and one clear line per bad field."""

from __future__ import annotations

from pathlib import Path

import pytest

from appliance.config import ConfigError, config_to_toml, load_config
from appliance.ha.instance import instance_config, instance_name


def write(tmp_path, text: str):
    path = tmp_path / "appliance.toml"
    path.write_text(text)
    return path


def test_defaults_when_no_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = load_config(environ={})
    assert config.kafka.bootstrap_servers is None
    assert (config.topics.events, config.topics.alerts, config.topics.dead_letters) == (
        "events", "alerts", "events.dlq")
    assert config.query.trigger == "continuous"
    assert config.query.interval == "1 second"
    assert config.spark.master == "local[2]"
    assert config.metrics.port == 9464
    assert config.rules.path == "rules.yml"


def test_file_values_and_passthrough_properties(tmp_path):
    path = write(tmp_path, """
[kafka]
bootstrap_servers = "127.0.0.1:9092,127.0.0.1:9093"
"security.protocol" = "SASL_SSL"
"sasl.mechanism" = "PLAIN"
[topics]
events = "in"
[query]
trigger = "microbatch"
interval = "250 milliseconds"
checkpoint_dir = "cp"
[rules]
path = "r.yml"
[spark]
master = "local[4]"
"spark.driver.memory" = "2g"
[metrics]
port = 0
""")
    config = load_config(path, environ={})
    assert config.kafka.bootstrap_servers == "127.0.0.1:9092,127.0.0.1:9093"
    assert config.kafka.properties == {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"}
    assert config.topics.events == "in" and config.topics.alerts == "alerts"
    assert config.query.trigger == "microbatch"
    assert config.spark.conf == {"spark.driver.memory": "2g"}
    assert config.metrics.port == 0
    # relative paths are relative to the config file
    assert config.rules.path == str(tmp_path / "r.yml")
    assert config.query.checkpoint_dir == str(tmp_path / "cp")


def test_env_overrides_win_over_file(tmp_path):
    path = write(tmp_path, '[query]\ntrigger = "continuous"\n')
    config = load_config(path, environ={
        "APPLIANCE_QUERY_TRIGGER": "microbatch",
        "APPLIANCE_METRICS_PORT": "9999",
        "APPLIANCE_TOPICS_DEAD_LETTERS": "dlq",
        "APPLIANCE_KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:1234",
        "APPLIANCE_KAFKA_SECURITY_PROTOCOL": "SSL",
        "OTHER_QUERY_TRIGGER": "x",
    })
    assert config.query.trigger == "microbatch"
    assert config.metrics.port == 9999
    assert config.topics.dead_letters == "dlq"
    assert config.kafka.bootstrap_servers == "127.0.0.1:1234"
    assert config.kafka.properties == {"security.protocol": "SSL"}


def test_cli_trigger_wins_over_everything(tmp_path):
    path = write(tmp_path, '[query]\ntrigger = "continuous"\n')
    config = load_config(path, environ={"APPLIANCE_QUERY_TRIGGER": "microbatch"})
    assert config.query.trigger == "microbatch"
    same = load_config(path, environ={"APPLIANCE_QUERY_TRIGGER": "microbatch"}, trigger=None)
    assert same.query.trigger == "microbatch"
    cli = load_config(path, environ={"APPLIANCE_QUERY_TRIGGER": "microbatch"}, trigger="continuous")
    assert cli.query.trigger == "continuous"


def test_realtime_needs_sparks_minimum_batch_duration(tmp_path):
    path = write(tmp_path, '[query]\ninterval = "1 second"\n')
    with pytest.raises(ConfigError) as err:
        load_config(path, environ={}, trigger="realtime")
    assert str(err.value) == (
        f"{path}: query.interval: the realtime trigger needs at least 5 seconds "
        "(spark.sql.streaming.realTimeMode.minBatchDuration) (got '1 second')")
    path.write_text('[query]\ninterval = "1 second"\n[spark]\n'
                    '"spark.sql.streaming.realTimeMode.minBatchDuration" = "1 second"\n')
    assert load_config(path, environ={}, trigger="realtime").query.interval == "1 second"


def test_each_trigger_gets_its_own_default_interval_unless_one_is_configured(tmp_path):
    path = write(tmp_path, "[query]\n")
    intervals = {t: load_config(path, environ={}, trigger=t).query.interval
                 for t in ("continuous", "realtime", "microbatch")}
    assert intervals == {"continuous": "1 second", "realtime": "5 minutes",
                         "microbatch": "0 seconds"}
    # switching trigger on the command line takes the new trigger's default, also over
    # a trigger the file names ...
    path.write_text('[query]\ntrigger = "continuous"\n')
    assert load_config(path, environ={}, trigger="realtime").query.interval == "5 minutes"
    # ... and so does a config written back (config_to_toml) and read with --trigger ...
    written = tmp_path / "written.toml"
    written.write_text(config_to_toml(load_config(path, environ={})))
    assert load_config(written, environ={}, trigger="realtime").query.interval == "5 minutes"
    # ... but never replaces an interval the operator wrote
    path.write_text('[query]\ninterval = "7 seconds"\n')
    assert load_config(path, environ={}, trigger="realtime").query.interval == "7 seconds"
    assert load_config(path, environ={}, trigger="microbatch").query.interval == "7 seconds"


def test_warmup_and_async_progress_are_on_by_default_and_can_be_switched_off(tmp_path):
    config = load_config(write(tmp_path, "[query]\n"), environ={})
    assert config.query.warmup is True and config.query.async_progress is True
    assert config.topics.warmup == "appliance.warmup"
    path = write(tmp_path, "[query]\nwarmup = false\nasync_progress = false\n")
    config = load_config(path, environ={"APPLIANCE_QUERY_WARMUP": "true"})
    assert config.query.warmup is True and config.query.async_progress is False


def test_stall_timeout_is_continuous_only_and_unset_by_default(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert load_config(None, environ={}).query.stall_timeout is None
    write(tmp_path, '[query]\nstall_timeout = "15 seconds"\n')
    assert load_config("appliance.toml", environ={}).query.stall_timeout == "15 seconds"
    # Real-time's 5-minute batches do not make it too short: the watch is continuous-only.
    write(tmp_path, '[query]\ntrigger = "realtime"\nstall_timeout = "15 seconds"\n')
    assert load_config("appliance.toml", environ={}).query.trigger == "realtime"


@pytest.mark.parametrize("text, expected", [
    ('[query]\ntrigger = "fast"\n',
     "appliance.toml: query.trigger: must be one of continuous, realtime, microbatch "
     "(got 'fast')"),
    ('[query]\ninterval = "soon"\n', "appliance.toml: query.interval: must look like"),
    ('[query]\nstarting_offsets = "middle"\n', "appliance.toml: query.starting_offsets: "),
    ('[kafka]\nbootstrap_servers = "no port"\n', "appliance.toml: kafka.bootstrap_servers: "),
    ('[topics]\nalerts = "bad topic!"\n', "appliance.toml: topics.alerts: must be a Kafka topic"),
    ('[metrics]\nport = 70000\n', "appliance.toml: metrics.port: must be 0..65535"),
    ('[metrics]\nport = "x"\n', "appliance.toml: metrics.port: "),
    ('[spark]\nmaster = "mesos://x"\n', "appliance.toml: spark.master: must be local[N]"),
    ('[spark]\n"driver.memory" = "1g"\n', "appliance.toml: spark: "),
    ('[query]\ntriger = "continuous"\n', "appliance.toml: query.triger: unknown key"),
    # Blank would otherwise resolve to the config file's own directory.
    ('[rules]\npath = ""\n', "appliance.toml: rules.path: must be a path (got a blank"),
    ('[query]\ncheckpoint_dir = " "\n', "appliance.toml: query.checkpoint_dir: must be a path"),
    ('[nonsense]\nx = 1\n', "appliance.toml: nonsense: unknown section"),
    ('query = 3\n', "appliance.toml: query: must be a table"),
    ('[query\n', "appliance.toml: not valid TOML"),
    ('[query]\nstall_timeout = "soon"\n', "appliance.toml: query.stall_timeout: must look like"),
    # Shorter than 5 epoch intervals, or 10 s: a healthy query's late epochs would trip it.
    ('[query]\nstall_timeout = "9 seconds"\n',
     "appliance.toml: query: stall_timeout must be at least 5 intervals and 10 s"),
    ('[query]\ninterval = "4 seconds"\nstall_timeout = "15 seconds"\n',
     "appliance.toml: query: stall_timeout must be at least 5 intervals and 10 s (got "
     "'15 seconds' with interval '4 seconds')"),
    ('[query]\nexecutor_loss_restarts = -1\n',
     "appliance.toml: query.executor_loss_restarts: must be 0..100, 0 = exit 1 on the first"),
    ('[query]\nexecutor_loss_restarts = "many"\n',
     "appliance.toml: query.executor_loss_restarts: "),
    ('[query]\nwarmup_batches = 101\n',
     "appliance.toml: query.warmup_batches: must be 0..100, 0 = no streaming warm-up"),
    # [ha]: a session that outlasts a few heartbeats; a group name Kafka can hold.
    ('[ha]\ngroup = "pair"\nsession_timeout = 0.5\n',
     "appliance.toml: ha.session_timeout: must be 1 to 60 seconds (got '0.5')"),
    ('[ha]\ngroup = "a pair"\n', "appliance.toml: ha.group: must be 1-200 characters"),
    ('[ha]\ngruop = "pair"\n', "appliance.toml: ha.gruop: unknown key"),
    ('[ha]\ngroup = "pair"\nrewarm_every = "5 seconds"\n',
     "appliance.toml: ha.rewarm_every: must be 10 seconds .. 24 hours, 0 = off"),
])
def test_bad_field_is_one_line_naming_file_and_field(tmp_path, monkeypatch, text, expected):
    monkeypatch.chdir(tmp_path)
    write(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        load_config("appliance.toml", environ={})
    message = str(err.value)
    assert message.startswith(expected), message
    assert "\n" not in message


def test_bad_env_override_names_the_variable(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write(tmp_path, "")
    with pytest.raises(ConfigError) as err:
        load_config("appliance.toml", environ={"APPLIANCE_QUERY_TRIGGER": "fast"})
    assert str(err.value) == ("appliance.toml: query.trigger (from APPLIANCE_QUERY_TRIGGER): "
                              "must be one of continuous, realtime, microbatch (got 'fast')")


def test_a_session_below_the_floor_from_the_environment_names_the_variable(tmp_path,
                                                                         monkeypatch):
    monkeypatch.chdir(tmp_path)
    write(tmp_path, '[ha]\ngroup = "pair"\n')
    assert load_config("appliance.toml", environ={}).ha.session_timeout_ms == 2000
    assert load_config("appliance.toml", environ={
        "APPLIANCE_HA_SESSION_TIMEOUT": "1 second"}).ha.session_timeout_ms == 1000
    with pytest.raises(ConfigError) as err:
        load_config("appliance.toml", environ={"APPLIANCE_HA_SESSION_TIMEOUT": "500 ms"})
    assert str(err.value) == ("appliance.toml: ha.session_timeout (from "
                              "APPLIANCE_HA_SESSION_TIMEOUT): must be 1 to 60 seconds "
                              "(got '500 ms')")


def test_explicit_missing_file_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match="nope.toml: file not found"):
        load_config(tmp_path / "nope.toml", environ={})


def test_source_and_sink_options_from_file_and_env(tmp_path):
    """[source] / [sink] hold Kafka reader / writer options (what the deploy renders from
    appliance.tuning); env overrides map underscores to dots like [kafka]."""
    path = write(tmp_path, """
[source]
"kafka.fetch.max.wait.ms" = "7"
maxOffsetsPerTrigger = 1000
[sink]
"kafka.linger.ms" = "1"
""")
    config = load_config(path, environ={"APPLIANCE_SOURCE_KAFKA_FETCH_MIN_BYTES": "2"})
    assert config.source.options == {"kafka.fetch.max.wait.ms": "7",
                                     "maxOffsetsPerTrigger": "1000",
                                     "kafka.fetch.min.bytes": "2"}
    assert config.sink.options == {"kafka.linger.ms": "1"}
    assert load_config(write(tmp_path, ""), environ={}).source.options == {}


def test_ha_is_off_without_a_group_and_each_instance_keeps_its_own_checkpoint(tmp_path):
    write(tmp_path, "[query]\ncheckpoint_dir = \"cp\"\n")
    single = load_config(tmp_path / "appliance.toml", environ={})
    assert not single.ha.enabled
    assert instance_config(single) == single  # today's single instance, unchanged
    write(tmp_path, "[query]\ncheckpoint_dir = \"cp\"\n[ha]\ngroup = \"pair\"\n"
                    "[metrics]\nport = 9470\n")
    paired = load_config(tmp_path / "appliance.toml",
                         environ={"APPLIANCE_HA_SESSION_TIMEOUT": "10"})
    assert paired.ha.enabled and paired.ha.session_timeout_ms == 10_000
    assert paired.ha.rewarm_s == 600.0  # a standby re-warms every 10 minutes...
    assert load_config(tmp_path / "appliance.toml",
                       environ={"APPLIANCE_HA_REWARM_EVERY": "0"}).ha.rewarm_s is None  # or not
    own = Path(instance_config(paired).query.checkpoint_dir)
    assert own.parent == tmp_path / "cp"
    assert own.name == instance_name(paired) and own.name.endswith("-9470")
    other = paired.model_copy(update={"metrics": paired.metrics.model_copy(
        update={"port": 9471})})
    assert instance_config(other).query.checkpoint_dir != str(own)  # the partner's
