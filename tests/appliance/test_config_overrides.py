"""Settings from outside the file: the embedded broker's port, environment variables that
keep a key's case, and ``--conf spark.key=value`` winning over file and environment."""

from __future__ import annotations

import pytest

from appliance.config import ConfigError, config_to_toml, load_config
from appliance.overrides import OverrideError, env_key, from_conf


def write(tmp_path, text: str):
    path = tmp_path / "appliance.toml"
    path.write_text(text)
    return path


def test_embedded_broker_port_defaults_to_kafkas_and_can_be_any(tmp_path):
    assert load_config(write(tmp_path, ""), environ={}).kafka.embedded_port == 9092
    config = load_config(write(tmp_path, "[kafka]\nembedded_port = 0\n"), environ={})
    assert config.kafka.embedded_port == 0
    assert config.kafka.properties == {}  # the appliance's key, not a client property
    assert load_config(write(tmp_path, ""), environ={
        "APPLIANCE_KAFKA_EMBEDDED_PORT": "19092"}).kafka.embedded_port == 19092
    assert "embedded_port = 0" in config_to_toml(config)  # tools write it back


@pytest.mark.parametrize("text, message", [
    ("[kafka]\nembedded_port = 70000\n",
     "kafka.embedded_port: must be 0..65535, 0 = any free port (got 70000)"),
    ('[kafka]\nbootstrap_servers = "k:9092"\nembedded_port = 9093\n',
     "kafka: embedded_port is for the embedded broker, which starts only without "
     "bootstrap_servers: remove one of them"),
])
def test_bad_embedded_port_is_one_line(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        load_config(path, environ={})
    assert str(err.value) == f"{path}: {message}"


@pytest.mark.parametrize("spelled, key", [
    ("spark_sql_streaming_stopTimeout", "spark.sql.streaming.stopTimeout"),
    ("SPARK_DRIVER_MEMORY", "spark.driver.memory"),  # all upper case: lower-cased
    ("spark_executorEnv_JAVA__HOME", "spark.executorEnv.JAVA_HOME"),  # __ is a "_"
    ("maxOffsetsPerTrigger", "maxOffsetsPerTrigger"),
    ("KAFKA_FETCH_MIN_BYTES", "kafka.fetch.min.bytes"),
])
def test_env_spelling_of_a_passthrough_key(spelled, key):
    assert env_key(spelled) == key


def test_env_overrides_keep_a_keys_case(tmp_path):
    config = load_config(write(tmp_path, '[spark]\n"spark.sql.streaming.stopTimeout" = "1s"\n'),
                         environ={
        "APPLIANCE_SPARK_spark_sql_streaming_stopTimeout": "30s",
        "APPLIANCE_SPARK_SPARK_DRIVER_MEMORY": "2g",
        "APPLIANCE_SOURCE_maxOffsetsPerTrigger": "5000",
        "APPLIANCE_QUERY_trigger": "microbatch",  # the appliance's own keys: any case
        "APPLIANCE_SPARK_driver_host": "10.0.0.8",
    })
    assert config.spark.conf == {"spark.sql.streaming.stopTimeout": "30s",
                                 "spark.driver.memory": "2g"}
    assert config.source.options == {"maxOffsetsPerTrigger": "5000"}
    assert config.query.trigger == "microbatch"
    assert config.spark.driver_host == "10.0.0.8"


def test_conf_wins_over_file_and_environment(tmp_path):
    path = write(tmp_path, """[spark]
master = "local[2]"
driver_host = "10.0.0.7"
"spark.sql.shuffle.partitions" = "2"
"spark.driver.memory" = "1g"
""")
    config = load_config(path, environ={"APPLIANCE_SPARK_spark_driver_memory": "2g"},
                         conf=from_conf(["spark.driver.memory=3g",
                                         "spark.sql.streaming.stopTimeout=30s",
                                         "spark.driver.extraJavaOptions=-Da=b -Dc=d=e",
                                         "spark.driver.host=10.0.0.9",  # the named key
                                         "spark.master=local[3]",
                                         "spark.sql.streaming.stopTimeout=45s"]))
    assert config.spark.conf == {"spark.sql.shuffle.partitions": "2",
                                 "spark.driver.memory": "3g",
                                 "spark.sql.streaming.stopTimeout": "45s",  # last wins
                                 "spark.driver.extraJavaOptions": "-Da=b -Dc=d=e"}
    assert config.spark.driver_host == "10.0.0.9" and config.spark.master == "local[3]"


def test_conf_replaces_the_files_other_spelling_of_a_named_key(tmp_path):
    path = write(tmp_path, '[spark]\n"spark.driver.host" = "10.0.0.7"\n')
    config = load_config(path, environ={}, conf=from_conf(["spark.driver.host=10.0.0.9"]))
    assert config.spark.driver_host == "10.0.0.9"
    assert "spark.driver.host" not in config.spark.conf


@pytest.mark.parametrize("argument", ["driver.memory=2g", "spark.driver.memory", "=x",
                                      "spark.a b=1"])
def test_conf_must_be_spark_key_equals_value(argument):
    with pytest.raises(OverrideError) as err:
        from_conf([argument])
    assert str(err.value) == (f"--conf {argument}: must be spark.KEY=VALUE "
                              f"(e.g. --conf spark.driver.memory=2g)")


def test_a_bad_override_is_named_in_the_one_line(tmp_path):
    path = write(tmp_path, "")
    with pytest.raises(ConfigError) as err:
        load_config(path, environ={}, conf=from_conf(["spark.master=mesos://x"]))
    assert str(err.value).startswith(f"{path}: spark.master (from --conf spark.master): "
                                     f"must be local[N]")
    with pytest.raises(ConfigError) as err:
        load_config(path, environ={"APPLIANCE_KAFKA_embedded_port": "x"})
    assert str(err.value).startswith(
        f"{path}: kafka.embedded_port (from APPLIANCE_KAFKA_embedded_port): ")
