"""The driver's cluster settings, the continuous fail-fast tuning, the shipped jars (no JVM)."""

from __future__ import annotations

from pathlib import Path

import pytest

from appliance import connector
from appliance.config import ConfigError, load_config
from appliance.process.session import spark_conf
from appliance.rules.rules_file import EXAMPLE_RULES, load_rules
from appliance.trigger import MODES
from appliance.tuning import tuning_for


def _load(tmp_path: Path, spark: str, environ: dict | None = None):
    path = tmp_path / "appliance.toml"
    path.write_text(f"[spark]\n{spark}\n")
    return load_config(path, environ=environ or {})


def test_driver_keys_become_the_spark_confs_executors_connect_back_with(tmp_path):
    config = _load(tmp_path, 'master = "spark://m:7077"\ndriver_host = "10.0.0.7"\n'
                             'driver_bind_address = "0.0.0.0"\ndriver_port = 7078\n'
                             'block_manager_port = 7079\n"spark.cores.max" = "4"')
    conf = spark_conf(config)
    assert conf["spark.driver.host"] == "10.0.0.7"
    assert conf["spark.driver.bindAddress"] == "0.0.0.0"
    assert conf["spark.driver.port"] == "7078"
    assert conf["spark.driver.blockManager.port"] == "7079"
    assert conf["spark.cores.max"] == "4"


def test_local_master_keeps_the_driver_on_loopback_cluster_leaves_sparks_default(tmp_path):
    local = spark_conf(_load(tmp_path, 'master = "local[2]"'))
    assert local["spark.driver.host"] == local["spark.driver.bindAddress"] == "127.0.0.1"
    cluster = spark_conf(_load(tmp_path, 'master = "spark://m:7077"'))
    assert "spark.driver.host" not in cluster and "spark.driver.port" not in cluster
    moved = spark_conf(_load(tmp_path, 'master = "local[2]"\ndriver_host = "10.0.0.7"'))
    assert moved["spark.driver.host"] == "10.0.0.7"


def test_driver_keys_from_the_environment(tmp_path):
    config = _load(tmp_path, 'master = "spark://m:7077"', environ={
        "APPLIANCE_SPARK_DRIVER_HOST": "10.0.0.8", "APPLIANCE_SPARK_DRIVER_PORT": "7100"})
    assert config.spark.driver_conf == {"spark.driver.host": "10.0.0.8",
                                        "spark.driver.port": "7100"}


@pytest.mark.parametrize("line, message", [
    ('driver_port = 70000', "spark.driver_port: must be 0..65535"),
    ('driver_host = "a b"', "spark.driver_host: must be a host name or IP address"),
    ('driver_host = "h"\n"spark.driver.host" = "g"',
     "spark: driver_host and 'spark.driver.host' both set: keep one"),
])
def test_bad_driver_setting_is_one_line_naming_the_key(tmp_path, line, message):
    with pytest.raises(ConfigError) as err:
        _load(tmp_path, line)
    assert str(err.value).startswith(f"{tmp_path / 'appliance.toml'}: {message}")
    assert "\n" not in str(err.value)


def test_continuous_fails_at_the_first_lost_task_the_others_keep_sparks_retries():
    assert tuning_for(MODES["continuous"]).spark_conf["spark.task.maxFailures"] == "1"
    for trigger in ("realtime", "microbatch"):
        assert "spark.task.maxFailures" not in tuning_for(MODES[trigger]).spark_conf


def test_jars_and_example_rules_are_package_data_next_to_the_package():
    package = Path(connector.__file__).resolve().parent
    assert [Path(p).parent for p in connector.jars()] == [package / "jars"] * 2
    assert EXAMPLE_RULES.parent == package / "examples"
    assert [r.id for r in load_rules(EXAMPLE_RULES)] == [
        "cpu-critical", "mem-warning", "disk-info"]
