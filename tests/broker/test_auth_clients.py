"""Real clients against the broker's TLS and SASL listeners: Java kafka-clients 3.9 (the
connector's client), kafka-python (the appliance's) and librdkafka (the load generator's).

Each authenticates over SASL_SSL with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 and gets its
record back; each is refused with a wrong password, a mechanism the listener does not
offer, and no authentication at all. An SSL-only listener serves all three with TLS alone.
"""

from __future__ import annotations

import logging

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition
from kafka.errors import KafkaTimeoutError

from appliance.broker import EmbeddedBroker

from support.broker.java_programs import run_java
from support.secure_helpers import (
    USER,
    broker_args,
    make_tls,
    make_users,
    new_password,
    write_private,
)

MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
TOPIC = "secured"


@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    return make_tls(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def sasl_ssl(tmp_path_factory, tls):
    """SASL_SSL broker offering PLAIN and SCRAM-SHA-256; SCRAM-SHA-512 on a second one
    offering only it, so "a mechanism this listener does not offer" is testable."""
    d = tmp_path_factory.mktemp("sasl-ssl")
    password = new_password()
    users = make_users(d / "users.toml", password)
    brokers = {}
    for name, mechanisms in (("main", "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"),
                             ("only512", "SCRAM-SHA-512")):
        b = EmbeddedBroker(extra_args=broker_args("SASL_SSL", tls, users, mechanisms)
                           + ["--topics", f"{TOPIC}:1"], log_path=d / f"{name}.log")
        brokers[name] = b.start()
    brokers["main"].password = password
    yield brokers
    for b in brokers.values():
        b.stop()


@pytest.fixture(scope="module")
def ssl_only(tmp_path_factory, tls):
    d = tmp_path_factory.mktemp("ssl")
    b = EmbeddedBroker(extra_args=broker_args("SSL", tls) + ["--topics", f"{TOPIC}:1"],
                       log_path=d / "broker.log")
    yield b.start()
    b.stop()


# -- kafka-python -----------------------------------------------------------------------

def _kp(bootstrap: str, tls, protocol: str, mechanism: str | None = None,
        password: str | None = None) -> dict:
    cfg = {"bootstrap_servers": bootstrap, "security_protocol": protocol,
           "ssl_cafile": str(tls.ca), "request_timeout_ms": 8000}
    if mechanism:
        cfg.update(sasl_mechanism=mechanism, sasl_plain_username=USER,
                   sasl_plain_password=password)
    return cfg


def _kp_round_trip(cfg: dict, value: bytes) -> bool:
    producer = KafkaProducer(**cfg, max_block_ms=8000)
    try:
        offset = producer.send(TOPIC, value, partition=0).get(timeout=15).offset
    finally:
        producer.close(timeout=5)
    consumer = KafkaConsumer(**cfg, consumer_timeout_ms=8000, enable_auto_commit=False)
    try:
        tp = KpTopicPartition(TOPIC, 0)
        consumer.assign([tp])
        consumer.seek(tp, offset)
        return any(m.offset == offset and m.value == value for m in consumer)
    finally:
        consumer.close()


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kafka_python_authenticates(sasl_ssl, tls, mechanism):
    b = sasl_ssl["main"]
    assert _kp_round_trip(_kp(b.bootstrap, tls, "SASL_SSL", mechanism, b.password),
                          f"kafka-python-{mechanism}".encode())


def _kp_refused(cfg: dict, caplog) -> str:
    """The producer cannot start; returns what kafka-python logged about why."""
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="kafka"):
        with pytest.raises(KafkaTimeoutError, match="Unable to bootstrap"):
            KafkaProducer(**cfg, bootstrap_timeout_ms=4000)
    return caplog.text


def test_kafka_python_refused(sasl_ssl, tls, caplog):
    main, only512 = sasl_ssl["main"], sasl_ssl["only512"]
    wrong = "not-" + main.password
    text = _kp_refused(_kp(main.bootstrap, tls, "SASL_SSL", "SCRAM-SHA-256", wrong), caplog)
    assert "SaslAuthenticationFailedError" in text and wrong not in text
    text = _kp_refused(_kp(main.bootstrap, tls, "SASL_SSL", "PLAIN", wrong), caplog)
    assert "SaslAuthenticationFailedError" in text and wrong not in text
    text = _kp_refused(_kp(only512.bootstrap, tls, "SASL_SSL", "PLAIN", main.password),
                       caplog)
    assert "UnsupportedSaslMechanism" in text
    _kp_refused(_kp(main.bootstrap, tls, "SSL"), caplog)  # TLS but no SASL: closed


def test_kafka_python_over_tls_only(ssl_only, tls):
    assert _kp_round_trip(_kp(ssl_only.bootstrap, tls, "SSL"), b"kafka-python-ssl")


# -- librdkafka (confluent-kafka) -------------------------------------------------------

def _rd(bootstrap: str, tls, protocol: str, mechanism: str | None = None,
        password: str | None = None, errors: list | None = None) -> dict:
    cfg = {"bootstrap.servers": bootstrap, "security.protocol": protocol,
           "ssl.ca.location": str(tls.ca), "log_level": 0}
    if mechanism:
        cfg.update({"sasl.mechanism": mechanism, "sasl.username": USER,
                    "sasl.password": password})
    if errors is not None:
        cfg["error_cb"] = errors.append
    return cfg


def _rd_round_trip(cfg: dict, value: bytes) -> bool:
    producer = Producer({**cfg, "message.timeout.ms": 10000})
    delivered = []
    producer.produce(TOPIC, value, partition=0,
                     on_delivery=lambda err, msg: delivered.append((err, msg.offset())))
    producer.flush(15)
    assert delivered and delivered[0][0] is None, delivered
    offset = delivered[0][1]
    consumer = Consumer({**cfg, "group.id": "auth-test", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(TOPIC, 0, offset)])
        for _ in range(60):  # bounded: up to ~15 s
            msg = consumer.poll(0.25)
            if msg is not None and not msg.error() and msg.offset() == offset:
                return msg.value() == value
        return False
    finally:
        consumer.close()


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_librdkafka_authenticates(sasl_ssl, tls, mechanism):
    b = sasl_ssl["main"]
    assert _rd_round_trip(_rd(b.bootstrap, tls, "SASL_SSL", mechanism, b.password),
                          f"librdkafka-{mechanism}".encode())


def _rd_refused(cfg_errors: tuple[dict, list]) -> list:
    cfg, errors = cfg_errors
    producer = Producer({**cfg, "message.timeout.ms": 3000})
    delivered = []
    producer.produce(TOPIC, b"x", partition=0,
                     on_delivery=lambda err, msg: delivered.append(err))
    producer.flush(10)
    assert delivered and delivered[0] is not None  # not delivered
    return errors


def _with_errors(*args, **kwargs) -> tuple[dict, list]:
    errors: list = []
    return _rd(*args, **kwargs, errors=errors), errors


def test_librdkafka_refused(sasl_ssl, tls):
    main, only512 = sasl_ssl["main"], sasl_ssl["only512"]
    wrong = "not-" + main.password
    for mechanism in MECHANISMS:
        errs = _rd_refused(_with_errors(main.bootstrap, tls, "SASL_SSL", mechanism, wrong))
        assert any(e.code() == KafkaError._AUTHENTICATION for e in errs), errs
        assert all(wrong not in e.str() for e in errs)
    errs = _rd_refused(_with_errors(only512.bootstrap, tls, "SASL_SSL", "SCRAM-SHA-256",
                                    main.password))
    assert any(e.code() == KafkaError._AUTHENTICATION and "SCRAM-SHA-256" in e.str()
               for e in errs), errs
    _rd_refused(_with_errors(main.bootstrap, tls, "SSL"))  # no SASL: never delivered


def test_librdkafka_over_tls_only(ssl_only, tls):
    assert _rd_round_trip(_rd(ssl_only.bootstrap, tls, "SSL"), b"librdkafka-ssl")


def test_mutual_tls_requires_a_client_certificate(tmp_path, tls):
    b = EmbeddedBroker(extra_args=broker_args("SSL", tls) + ["--ssl-client-ca", str(tls.ca),
                                                             "--topics", f"{TOPIC}:1"],
                       log_path=tmp_path / "broker.log").start()
    try:
        with_cert = {**_rd(b.bootstrap, tls, "SSL"),
                     "ssl.certificate.location": str(tls.client_cert),
                     "ssl.key.location": str(tls.client_key)}
        assert _rd_round_trip(with_cert, b"librdkafka-mtls")
        errs = _rd_refused(_with_errors(b.bootstrap, tls, "SSL"))  # no certificate
        assert any(e.code() in (KafkaError._SSL, KafkaError._TRANSPORT,
                                KafkaError._ALL_BROKERS_DOWN) for e in errs), errs
    finally:
        b.stop()


# -- Java kafka-clients -----------------------------------------------------------------

def _java_scenario(path, name: str, bootstrap: str, tls, protocol: str,
                   mechanism: str | None = None, password: str | None = None):
    # Generous where the client should succeed (a loaded host), short where it can only
    # time out (no SASL: the broker closes every attempt).
    timeout_ms = 8000 if name == "NO_SASL" else 60000
    lines = [f"check.name={name}", f"check.topic={TOPIC}", f"check.timeout.ms={timeout_ms}",
             f"bootstrap.servers={bootstrap}",
             f"security.protocol={protocol}", "ssl.truststore.type=PEM",
             f"ssl.truststore.location={tls.ca}"]
    if mechanism:
        module = ("org.apache.kafka.common.security.plain.PlainLoginModule"
                  if mechanism == "PLAIN"
                  else "org.apache.kafka.common.security.scram.ScramLoginModule")
        lines += [f"sasl.mechanism={mechanism}",
                  f'sasl.jaas.config={module} required username="{USER}" '
                  f'password="{password}";']
    return str(write_private(path, "\n".join(lines) + "\n"))


@pytest.mark.java
def test_java_client_authenticates_and_is_refused(sasl_ssl, ssl_only, tls, java_checks,
                                                  tmp_path):
    main, only512 = sasl_ssl["main"], sasl_ssl["only512"]
    pw = main.password
    scenarios = [
        ("PLAIN", main, "SASL_SSL", "PLAIN", pw),
        ("SCRAM_SHA_256", main, "SASL_SSL", "SCRAM-SHA-256", pw),
        ("SCRAM_SHA_512", main, "SASL_SSL", "SCRAM-SHA-512", pw),
        ("SSL_ONLY", ssl_only, "SSL", None, None),
        ("WRONG_PASSWORD", main, "SASL_SSL", "SCRAM-SHA-512", "not-" + pw),
        ("WRONG_PASSWORD_PLAIN", main, "SASL_SSL", "PLAIN", "not-" + pw),
        ("WRONG_MECHANISM", only512, "SASL_SSL", "SCRAM-SHA-256", pw),
        ("NO_SASL", main, "SSL", None, None),
    ]
    files = [_java_scenario(tmp_path / f"{name}.properties", name, b.bootstrap, tls, proto,
                            mech, p) for name, b, proto, mech, p in scenarios]
    out = run_java(java_checks, "SecureCheck", *files, timeout=240)
    assert out["PLAIN"] == "ok"
    assert out["SCRAM_SHA_256"] == "ok"
    assert out["SCRAM_SHA_512"] == "ok"
    assert out["SSL_ONLY"] == "ok"
    assert out["WRONG_PASSWORD"] == "SaslAuthenticationException"
    assert out["WRONG_PASSWORD_PLAIN"] == "SaslAuthenticationException"
    assert out["WRONG_MECHANISM"] == "UnsupportedSaslMechanismException"
    assert out["NO_SASL"] == "TimeoutException"  # closed before any request is served
