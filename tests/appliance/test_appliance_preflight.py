"""Task-slot preflight and the checkpoint reader behind the lag metrics (no JVM)."""

from __future__ import annotations

import pytest

from appliance.observability.metrics import committed_offsets
from appliance.process.preflight import PreflightError
from appliance.process.slots import check_slots, local_slots
from appliance.trigger import MODES, trigger_mode


@pytest.mark.parametrize("master, slots", [
    ("local", 1), ("local[3]", 3), ("local[4,2]", 4), ("spark://h:7077", None), ("yarn", None),
])
def test_local_slots(master, slots):
    assert local_slots(master) == slots


def test_local_star_is_cpu_count():
    assert local_slots("local[*]") >= 1


@pytest.mark.parametrize("trigger", ["continuous", "realtime"])
def test_long_running_tasks_need_a_slot_per_partition(trigger):
    check_slots(trigger_mode(trigger), partitions=2, slots=2, where="x")
    with pytest.raises(PreflightError, match="has 3 partitions but x gives 2 slots"):
        check_slots(trigger_mode(trigger), partitions=3, slots=2, where="x")


def test_microbatch_needs_no_slot_per_partition():
    check_slots(trigger_mode("microbatch"), partitions=8, slots=1, where="x")


def test_output_mode_per_trigger():
    assert [MODES[t].output_mode for t in ("continuous", "realtime", "microbatch")] == [
        "append", "update", "append"]


def test_committed_offsets_reads_the_newest_committed_batch(tmp_path):
    (tmp_path / "offsets").mkdir()
    (tmp_path / "commits").mkdir()
    meta = '{"batchWatermarkMs":0,"batchTimestampMs":1}'
    (tmp_path / "offsets" / "0").write_text(f'v1\n{meta}\n{{"ev":{{"0":3,"1":4}}}}\n')
    (tmp_path / "offsets" / "1").write_text(f'v1\n{meta}\n{{"ev":{{"0":9,"1":7}}}}\n')
    (tmp_path / "offsets" / "2").write_text(f'v1\n{meta}\n{{"ev":{{"0":20,"1":20}}}}\n')
    (tmp_path / "commits" / "0").write_text('v1\n{"nextBatchWatermarkMs":0}\n')
    (tmp_path / "commits" / "1").write_text('v1\n{"nextBatchWatermarkMs":0}\n')
    # batch 2 is planned but not committed: it does not count as processed
    assert committed_offsets(tmp_path) == {"ev": {0: 9, 1: 7}}
    assert committed_offsets(tmp_path / "nothing-yet") == {}


def test_python_client_config_from_kafka_properties():
    from appliance.config import KafkaConfig
    from appliance.topics import client_config

    kafka = KafkaConfig.model_validate({
        "bootstrap_servers": "a:1,b:2",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule '
                            'required username="app" password="p\\"w";',
        "ssl.truststore.location": "/etc/kafka/truststore.jks",  # Java-only: not passed
    })
    assert client_config(kafka, kafka.bootstrap_servers) == {
        "bootstrap_servers": ["a:1", "b:2"], "request_timeout_ms": 15000,
        "security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "app", "sasl_plain_password": 'p"w',
    }
