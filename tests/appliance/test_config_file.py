"""``config_to_toml``/``write_config``: what they write, ``load_config`` reads back equal."""

from __future__ import annotations

import stat
import tomllib

import pytest

from appliance.config import Config, config_to_toml, load_config, write_config


def _everything(tmp_path) -> Config:
    """Every section, named keys, pass-through keys with dots, ints, bools, odd strings."""
    return Config.model_validate({
        "kafka": {"bootstrap_servers": "127.0.0.1:9092", "client.id": 'say "hi"\\ \t é 😀',
                  "request.timeout.ms": 30000},
        "topics": {"events": "ev", "alerts": "al", "dead_letters": "ev.dlq", "warmup": "wu"},
        "query": {"trigger": "realtime", "interval": "5 seconds",
                  "checkpoint_dir": str(tmp_path / "checkpoint"),
                  "starting_offsets": "latest", "warmup": False, "async_progress": False},
        "rules": {"path": str(tmp_path / "rules.yml")},
        "spark": {"master": "spark://10.0.0.1:7077", "driver_host": "127.0.0.1",
                  "driver_bind_address": "127.0.0.1", "driver_port": 40000,
                  "block_manager_port": 40001, "spark.executor.memory": "512m",
                  "spark.task.cpus": 1},
        "source": {"maxOffsetsPerTrigger": 1000, "kafka.fetch.max.wait.ms": "5"},
        "sink": {"kafka.linger.ms": "0"},
        "metrics": {"port": 0, "host": "0.0.0.0", "alert_latency": False},
    })


def test_everything_written_loads_back_equal(tmp_path):
    config = _everything(tmp_path)
    path = write_config(config, tmp_path / "appliance.toml")
    assert load_config(path, environ={}) == config


def test_defaults_round_trip_and_stay_unwritten(tmp_path):
    config = Config()
    assert config_to_toml(config) == "\n"
    loaded = load_config(write_config(config, tmp_path / "appliance.toml"), environ={})
    # the default relative paths resolve against the file's directory, as for any file
    assert loaded.rules.path == str(tmp_path / "rules.yml")
    assert loaded.model_dump(exclude={"rules", "query"}) == config.model_dump(
        exclude={"rules", "query"})


@pytest.mark.parametrize("trigger", ["continuous", "realtime", "microbatch"])
def test_unset_interval_stays_the_triggers_default(tmp_path, trigger):
    config = Config.model_validate({"query": {"trigger": trigger,
                                              "checkpoint_dir": str(tmp_path / "cp")}})
    assert "interval" not in tomllib.loads(config_to_toml(config))["query"]
    path = write_config(config, tmp_path / "appliance.toml")
    loaded = load_config(path, environ={})
    assert loaded.query == config.query
    # not written, so --trigger still gives the new trigger its own default
    other = "realtime" if trigger != "realtime" else "microbatch"
    assert load_config(path, environ={}, trigger=other).query.interval == \
        Config.model_validate({"query": {"trigger": other}}).query.interval


def test_relative_paths_are_relative_to_the_file(tmp_path):
    config = Config.model_validate({"rules": {"path": "rules.yml"},
                                    "query": {"checkpoint_dir": "checkpoint"}})
    (tmp_path / "sub").mkdir()
    loaded = load_config(write_config(config, tmp_path / "sub" / "a.toml"), environ={})
    assert loaded.rules.path == str(tmp_path / "sub" / "rules.yml")
    assert loaded.query.checkpoint_dir == str(tmp_path / "sub" / "checkpoint")


def test_dotted_keys_are_quoted_not_nested(tmp_path):
    text = config_to_toml(_everything(tmp_path))
    assert tomllib.loads(text)["spark"]["spark.executor.memory"] == "512m"
    assert '"spark.executor.memory" = "512m"' in text
    assert "master = " in text


def test_the_file_is_private_even_when_it_existed(tmp_path):
    path = tmp_path / "appliance.toml"
    path.write_text("old")
    path.chmod(0o644)
    write_config(Config(), path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_text() == "\n"


def test_a_value_toml_cannot_hold_is_refused_by_name():
    config = Config.model_validate({"spark": {"spark.x.list": [1, 2]}})
    with pytest.raises(TypeError, match=r"spark\.spark\.x\.list"):
        config_to_toml(config)
