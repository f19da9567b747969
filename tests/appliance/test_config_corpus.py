"""What users type is checked: a corpus of wrong configs (``data/config_corpus.yml``) with
the one line ``appliance config check`` prints for each, Kafka properties held to the
names of the kafka-clients jar the wheel ships, and ``APPLIANCE_`` variables that set
nothing refused instead of ignored."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from appliance.broker.users_cli import PASSWORD_ENV
from appliance.broker.wire.codegen import STRICT_ENV
from appliance.config import ConfigError, KafkaConfig, check_config, load_config
from appliance.kafka_names import KAFKA_CLIENTS_VERSION, PROPERTIES
from appliance.kafka_properties import SINK_SECTION, SOURCE_SECTION, check_properties
from appliance.overrides import OTHER_VARIABLES
from appliance.process.class_archive import DIR_ENV
from appliance.trigger import MODES
from appliance.tuning import tuning_for

ROOT = Path(__file__).resolve().parents[2]
CASES = yaml.safe_load((Path(__file__).parent / "data" / "config_corpus.yml").read_text())["cases"]


def _id(case: dict) -> str:
    return (case["toml"].replace("\n", " ").strip() or " ".join(case.get("env", {})))[:60]


def test_the_corpus_is_big_enough():
    assert len(CASES) >= 30


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_the_check_prints_the_line_the_corpus_records(case):
    config, problems = check_config(text=case["toml"], environ=case.get("env", {}),
                                    label="appliance.toml")
    assert config is None
    assert [p.line(env_hint=True) for p in problems] == [f"appliance.toml: {case['line']}"]


def _check(tmp_path: Path, text: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    config = tmp_path / "appliance.toml"
    config.write_text(text)
    full = {k: v for k, v in os.environ.items() if not k.startswith("APPLIANCE_")}
    full.update(env, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "appliance", "config", "check", str(config),
                           "--no-rules"], capture_output=True, text=True, timeout=60,
                          env=full, cwd=ROOT)


def test_the_kafka_address_is_never_silently_ignored(tmp_path):
    """The traps of issue 52: each passed with exit 0 ("Kafka: the embedded broker") while
    the appliance went on to use its embedded broker."""
    result = _check(tmp_path, '[kafka]\nbootstrap_server = "kafka-1:9092"\n'
                              '"bootstrap.servers" = "kafka-1:9092"\n',
                    {"APPLIANCE_KAFKA_BOOTSTRAP_SERVER": "kafka-1:9092",
                     "APPLIANCE_QEURY_TRIGGER": "microbatch"})
    assert result.returncode == 2, result.stdout
    config = tmp_path / "appliance.toml"
    assert result.stderr.splitlines() == [
        f"{config}: APPLIANCE_QEURY_TRIGGER: names no section of appliance.toml (sections: "
        f"kafka, topics, query, rules, spark, source, sink, metrics, cpus, ha) (did you mean "
        f"APPLIANCE_QUERY_TRIGGER?)",
        f"{config}: kafka.bootstrap_server: not a Kafka client property (kafka-clients "
        f"{KAFKA_CLIENTS_VERSION}) (did you mean bootstrap_servers?)",
        f"{config}: kafka.bootstrap.servers: set by the appliance, not here (every client "
        f"gets bootstrap_servers, or the embedded broker's address): set bootstrap_servers "
        f"instead",
        f"{config}: kafka.bootstrap.server (from APPLIANCE_KAFKA_BOOTSTRAP_SERVER): not a "
        f"Kafka client property (kafka-clients {KAFKA_CLIENTS_VERSION}) (did you mean "
        f"APPLIANCE_KAFKA_BOOTSTRAP_SERVERS?)"]


def test_the_variables_that_are_not_settings_are_the_ones_the_code_reads():
    assert OTHER_VARIABLES == {DIR_ENV, PASSWORD_ENV, STRICT_ENV}
    config, problems = check_config(text="", environ={name: "1" for name in OTHER_VARIABLES})
    assert problems == [] and config is not None


def test_what_the_docs_and_the_deploy_write_is_accepted(tmp_path):
    """Java's names, librdkafka's spellings of credentials and CA, and the appliance's own
    keys, as docs/appliance.md's secured example and the deploy's template write them."""
    config = load_config(_write(tmp_path, """[kafka]
bootstrap_servers = "kafka-1.example:9093"
"security.protocol" = "SASL_SSL"
"sasl.mechanism" = "SCRAM-SHA-512"
"sasl.username" = "appliance"
"ssl.truststore.type" = "PEM"
"ssl.truststore.location" = "/etc/appliance/ca.pem"
"ssl.endpoint.identification.algorithm" = ""
"linger.ms" = 0
"enable.idempotence" = false
"request.timeout.ms" = "30000"
[source]
"kafka.fetch.min.bytes" = 1
maxOffsetsPerTrigger = "auto"
[sink]
"kafka.linger.ms" = "0"
"""), environ={"APPLIANCE_KAFKA_SASL_PASSWORD": "pw"})
    assert config.kafka.properties["sasl.mechanism"] == "SCRAM-SHA-512"


@pytest.mark.parametrize("mode", sorted(MODES))
def test_the_tunings_own_reader_and_writer_options_are_kafkas_names(mode):
    tuning = tuning_for(MODES[mode])
    assert check_properties(tuning.source_options, SOURCE_SECTION) == []
    assert check_properties(tuning.sink_options, SINK_SECTION) == []


def test_a_model_built_in_code_is_held_to_the_same_names(tmp_path):
    with pytest.raises(ValueError, match="bootstrap_server: not a Kafka client property"):
        KafkaConfig.model_validate({"bootstrap_server": "k:9092"})
    path = _write(tmp_path, '[kafka]\n"bootstrap.servers" = "k:9092"\n')
    with pytest.raises(ConfigError) as err:
        load_config(path, environ={})
    assert str(err.value).startswith(f"{path}: kafka.bootstrap.servers: set by the appliance")


@pytest.mark.java
def test_the_names_are_the_jars(tmp_path):
    """``appliance/kafka_names.py`` is what scripts/kafka_config_names.py writes from the
    pinned kafka-clients jar now, so it cannot go stale."""
    out = tmp_path / "kafka_names.py"
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "kafka_config_names.py"),
                           "--output", str(out)], capture_output=True, text=True, timeout=180,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    assert out.read_text() == (ROOT / "appliance" / "kafka_names.py").read_text()
    assert {"bootstrap.servers", "linger.ms", "fetch.min.bytes", "sasl.jaas.config"} \
        <= set(PROPERTIES)



def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "appliance.toml"
    path.write_text(text)
    return path
