"""One set of [kafka] security settings, spoken to Java, kafka-python and librdkafka; the
password never printed; the load generator reads the same settings from a file or env."""

from __future__ import annotations

import pytest

from appliance.client_security import ClientSecurity, Secret, SecuritySettingsError
from appliance.config import ConfigError, KafkaConfig, load_config
from appliance.topics import client_config
from loadgen.config import LoadConfig
from loadgen.kafka_config import (
    KafkaConfigError,
    admin_config,
    consumer_config,
    load_security,
    producer_config,
)

SECRET = "s3cr\"et-pw"
JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
        'username="app" password="s3cr\\"et-pw";')


def test_java_spelling_reaches_every_client():
    props = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
             "sasl.jaas.config": JAAS, "ssl.truststore.type": "PEM",
             "ssl.truststore.location": "/etc/ca.pem"}
    sec = ClientSecurity.from_properties(props)
    assert sec.java(props) == props  # already Java: passed as it is
    assert sec.kafka_python() == {
        "security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "app", "sasl_plain_password": SECRET,
        "ssl_cafile": "/etc/ca.pem"}
    assert sec.librdkafka() == {
        "security.protocol": "sasl_ssl", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "app", "sasl.password": SECRET, "ssl.ca.location": "/etc/ca.pem",
        "ssl.endpoint.identification.algorithm": "https"}


@pytest.mark.parametrize("mechanism, module", [
    ("PLAIN", "org.apache.kafka.common.security.plain.PlainLoginModule"),
    ("SCRAM-SHA-256", "org.apache.kafka.common.security.scram.ScramLoginModule"),
])
def test_librdkafka_spelling_becomes_jaas_for_java(mechanism, module):
    props = {"security.protocol": "SASL_SSL", "sasl.mechanism": mechanism,
             "sasl.username": "app", "sasl.password": SECRET, "ssl.ca.location": "/ca.pem",
             "ssl.endpoint.identification.algorithm": ""}
    sec = ClientSecurity.from_properties(props)
    java = sec.java(props)
    assert java == {
        "security.protocol": "SASL_SSL", "sasl.mechanism": mechanism,
        "ssl.endpoint.identification.algorithm": "",
        "sasl.jaas.config": f'{module} required username="app" password="s3cr\\"et-pw";',
        "ssl.truststore.type": "PEM", "ssl.truststore.location": "/ca.pem"}
    assert ClientSecurity.from_properties(java) == sec  # and back: the same settings
    assert sec.kafka_python()["ssl_check_hostname"] is False
    assert sec.librdkafka()["ssl.endpoint.identification.algorithm"] == "none"


def test_the_password_never_prints():
    sec = ClientSecurity.from_properties({"security.protocol": "SASL_PLAINTEXT",
                                          "sasl.mechanism": "PLAIN", "sasl.jaas.config": JAAS})
    assert SECRET not in repr(sec) and SECRET not in str(sec)
    assert repr(Secret(SECRET)) == "'***'" and SECRET not in f"{Secret(SECRET)}"
    config = LoadConfig(bootstrap="b:1", rate=1, duration=1, security=sec)
    assert SECRET not in repr(config)


@pytest.mark.parametrize("props, problem", [
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.username": "u"},
     "sasl.jaas.config: needs both"),
    ({"security.protocol": "TLS"}, "security.protocol: must be one of"),
])
def test_contradictions_name_the_property_not_the_value(props, problem):
    with pytest.raises(SecuritySettingsError, match=problem):
        ClientSecurity.from_properties(props)


def test_config_error_is_one_line_without_the_secret(tmp_path):
    path = tmp_path / "appliance.toml"
    path.write_text('[kafka]\n"security.protocol" = "SASL_SSL"\n"sasl.mechanism" = "PLAIN"\n'
                    f"\"sasl.password\" = '{SECRET}x'\n")
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={})
    assert str(info.value).startswith(f"{path}: kafka.sasl.jaas.config: needs both")
    assert SECRET not in str(info.value)


def test_other_mechanisms_are_left_to_the_clients_pass_through():
    props = {"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER"}
    sec = ClientSecurity.from_properties(props)
    assert sec.java(props) == props
    assert sec.kafka_python() == {"security_protocol": "SASL_SSL",
                                  "sasl_mechanism": "OAUTHBEARER"}


def test_password_from_the_environment_reaches_kafka_python(tmp_path):
    path = tmp_path / "appliance.toml"
    path.write_text('[kafka]\nbootstrap_servers = "h:9093"\n"security.protocol" = "SASL_SSL"\n'
                    '"sasl.mechanism" = "SCRAM-SHA-256"\n"sasl.username" = "app"\n')
    config = load_config(path, environ={"APPLIANCE_KAFKA_SASL_PASSWORD": SECRET})
    assert client_config(config.kafka, "h:9093")["sasl_plain_password"] == SECRET
    jaas = config.kafka.java_properties["sasl.jaas.config"]
    assert 'username="app"' in jaas and "ScramLoginModule" in jaas
    assert "sasl.password" not in config.kafka.java_properties  # librdkafka-only key


def test_plaintext_stays_plain():
    kafka = KafkaConfig()
    assert kafka.java_properties == {} and kafka.security.kafka_python() == {}
    assert producer_config("b:1")["bootstrap.servers"] == "b:1"
    assert "security.protocol" not in consumer_config("b:1")


def test_loadgen_reads_the_settings_file_or_its_env_var(tmp_path):
    path = tmp_path / "lg.toml"
    path.write_text(f'[kafka]\n"security.protocol" = "SASL_SSL"\n"sasl.mechanism" = "PLAIN"\n'
                    f"\"sasl.jaas.config\" = '{JAAS}'\n")
    sec = load_security(str(path), environ={})
    assert sec == load_security(None, environ={"LOADGEN_KAFKA_CONFIG": str(path)})
    for cfg in (producer_config("b:1", security=sec), consumer_config("b:1", security=sec),
                admin_config("b:1", sec)):
        assert cfg["sasl.password"] == SECRET and cfg["security.protocol"] == "sasl_ssl"
    assert load_security(None, environ={}) == ClientSecurity()
    with pytest.raises(KafkaConfigError, match="file not found"):
        load_security(str(tmp_path / "missing.toml"), environ={})
