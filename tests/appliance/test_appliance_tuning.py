"""Tuning is plain data (Ansible renders it) and the session applies it."""

from __future__ import annotations

import json

from appliance.config import Config
from appliance.process.session import spark_conf
from appliance.trigger import MODES
from appliance.tuning import GC_OPTIONS, main, tuning_for


def test_tuning_is_strings_only_and_per_trigger():
    for trigger in ("continuous", "realtime", "microbatch"):
        tuning = tuning_for(MODES[trigger]).as_dict()
        for section in ("spark_conf", "source_options", "sink_options"):
            assert all(isinstance(k, str) and isinstance(v, str)
                       for k, v in tuning[section].items())
        assert tuning["spark_conf"]["spark.ui.enabled"] == "false"
        assert tuning["sink_options"]["kafka.linger.ms"] == "0"
        assert all(opt in tuning["spark_conf"]["spark.driver.extraJavaOptions"]
                   for opt in GC_OPTIONS)
    # backpressure exists only where Spark honours it
    assert "maxOffsetsPerTrigger" in tuning_for(MODES["microbatch"]).source_options
    assert "maxOffsetsPerTrigger" not in tuning_for(MODES["continuous"]).source_options


def test_operator_spark_keys_override_tuning_and_jars_are_loaded():
    config = Config.model_validate({"spark": {"spark.sql.shuffle.partitions": "7"}})
    conf = spark_conf(config)
    assert conf["spark.sql.shuffle.partitions"] == "7"
    assert "appliance-kafka-connector.jar" in conf["spark.jars"]
    assert conf["spark.driver.bindAddress"] == "127.0.0.1"


def test_tuning_prints_json_for_deployment_templates(capsys):
    assert main(["realtime"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == json.loads(json.dumps(tuning_for(MODES["realtime"]).as_dict()))


def test_async_progress_only_where_spark_has_it_and_only_when_asked():
    for trigger in ("realtime", "microbatch"):
        options = tuning_for(MODES[trigger]).query_options
        assert options["asyncProgressTrackingEnabled"] == "true"
        # our sink is not on Spark's by-name list: the override vouches for it
        assert options["_asyncProgressTrackingOverrideSinkSupportCheck"] == "true"
        assert tuning_for(MODES[trigger], async_progress=False).query_options == {}
    assert tuning_for(MODES["continuous"]).query_options == {}  # Spark has none for continuous
    # every batch's progress is written (real-time refuses anything else; micro-batch
    # with a longer interval leaves a quiet stream's last batch uncommitted for good)
    for trigger in ("realtime", "microbatch"):
        assert tuning_for(MODES[trigger]).query_options[
            "asyncProgressTrackingCheckpointIntervalMs"] == "0"


def test_epoch_poll_is_not_the_record_path_and_stays_coarse():
    conf = tuning_for(MODES["continuous"]).spark_conf
    assert int(conf["spark.sql.streaming.continuous.executorPollIntervalMs"]) >= 10


def test_local_checkpoints_are_renamed_without_a_child_process_per_entry():
    """Spark's default checkpoint manager renames through Hadoop's FileContext, which
    runs `readlink` in a child process per path on a local disk (tuning.py); a local
    checkpoint gets the FileSystem-based manager, any other scheme Spark's default, and
    the operator's own choice wins."""
    key = "spark.sql.streaming.checkpointFileManagerClass"
    local = spark_conf(Config.model_validate({"query": {"checkpoint_dir": "var/cp"}}))
    assert local[key].endswith(".FileSystemBasedCheckpointFileManager")
    uri = spark_conf(Config.model_validate({"query": {"checkpoint_dir": "file:///srv/cp"}}))
    assert uri[key] == local[key]
    for remote in ("hdfs://nn:8020/cp", "s3a://bucket/cp"):
        conf = spark_conf(Config.model_validate({"query": {"checkpoint_dir": remote}}))
        assert key not in conf
    own = spark_conf(Config.model_validate({"query": {"checkpoint_dir": "var/cp"},
                                            "spark": {key: "my.Manager"}}))
    assert own[key] == "my.Manager"
