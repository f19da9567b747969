"""Locust: drive the appliance interactively with the same events as ``loadgen run``.

    locust -f loadgen/locustfile.py --headless -u 10 -r 5 -t 30s --host 127.0.0.1:9092

``--host`` is the Kafka bootstrap address. Each user sends events (``LOADGEN_USER_RATE``
per second, default 10; ``LOADGEN_ALERT_RATIO`` of them match an example rule, default
0.5) and Locust shows two request types:

* ``kafka`` / ``produce``: time until the broker acknowledged the event;
* ``alert`` / ``end_to_end``: event time stamp to its alert consumed from the alerts
  topic, measured by one shared alert consumer per Locust process.

Locust paces users closed-loop (``wait_time``), so its tails are indicative only; the
open-loop numbers free of coordinated omission come from ``loadgen run``. Locust runs on
gevent: confluent-kafka's calls here never block (``poll(0)``, ``consume(timeout=0)``),
and two greenlets serve delivery reports and alerts, yielding between polls.
Topics: ``LOADGEN_EVENTS_TOPIC`` (events), ``LOADGEN_ALERTS_TOPIC`` (alerts).
TLS/SASL: ``LOADGEN_KAFKA_CONFIG`` names a TOML file whose ``[kafka]`` table holds the
security settings (an ``appliance.toml`` works; ``APPLIANCE_KAFKA_*`` override), as for
``loadgen run --kafka-config``; secrets never go on Locust's command line.
"""

from __future__ import annotations

import itertools
import json
import os
import secrets
import sys
import time
from pathlib import Path

import gevent
from confluent_kafka import Consumer, KafkaException, Producer
from locust import User, constant_throughput, events, task
from locust.runners import MasterRunner

try:
    import loadgen  # noqa: F401
except ImportError:  # a checkout that is not pip-installed: Locust only adds loadgen/
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from loadgen.collector import end_offsets  # noqa: E402
from loadgen.config import APPLIANCE_TOPICS  # noqa: E402
from loadgen.events import EventFactory  # noqa: E402
from loadgen.kafka_config import consumer_config, load_security, producer_config  # noqa: E402

EVENTS_TOPIC = os.environ.get("LOADGEN_EVENTS_TOPIC", APPLIANCE_TOPICS.events)
ALERTS_TOPIC = os.environ.get("LOADGEN_ALERTS_TOPIC", APPLIANCE_TOPICS.alerts)
USER_RATE = float(os.environ.get("LOADGEN_USER_RATE", "10"))
ALERT_RATIO = float(os.environ.get("LOADGEN_ALERT_RATIO", "0.5"))
IDLE_SLEEP_S = 0.001


class SharedKafka:
    """One producer and one alert consumer per Locust process, shared by its users."""

    def __init__(self, environment) -> None:
        bootstrap = environment.host
        if not bootstrap:
            raise RuntimeError("pass the Kafka bootstrap address as --host")
        self.environment = environment
        self.factory = EventFactory("lc" + secrets.token_hex(4), ALERT_RATIO, 0.0)
        self.counter = itertools.count()
        # Every delivery report is a Locust "produce" sample, not only the failures.
        security = load_security(None)  # from $LOADGEN_KAFKA_CONFIG, if set
        self.producer = Producer({**producer_config(bootstrap, security=security),
                                  "delivery.report.only.error": False})
        self.consumer = Consumer(consumer_config(bootstrap, security=security))
        self.consumer.assign(end_offsets(self.consumer, [ALERTS_TOPIC], bootstrap))
        self.producer.list_topics(EVENTS_TOPIC, timeout=10)
        self.running = True
        self.greenlets = [gevent.spawn(self._serve_deliveries), gevent.spawn(self._watch_alerts)]

    def send(self) -> None:
        i = next(self.counter)
        payload = self.factory.encode(i, time.time() * 1000.0)
        started = time.perf_counter()
        fire = self.environment.events.request.fire

        def on_delivery(err, _msg) -> None:
            fire(request_type="kafka", name="produce",
                 response_time=(time.perf_counter() - started) * 1000.0,
                 response_length=len(payload),
                 exception=None if err is None else KafkaException(err), context={})

        try:
            self.producer.produce(EVENTS_TOPIC, payload, on_delivery=on_delivery)
        except (BufferError, KafkaException) as exc:
            fire(request_type="kafka", name="produce", response_time=0.0,
                 response_length=0, exception=exc, context={})
        self.producer.poll(0)

    def _serve_deliveries(self) -> None:
        while self.running:
            self.producer.poll(0)
            gevent.sleep(IDLE_SLEEP_S)

    def _watch_alerts(self) -> None:
        fire = self.environment.events.request.fire
        index_of = self.factory.index_of
        while self.running:
            messages = self.consumer.consume(500, 0)
            for message in messages:
                if message.error() is not None:
                    continue
                now_ms = time.time() * 1000.0
                try:
                    alert = json.loads(message.value())
                    ts = float(alert["ts"])
                except (ValueError, TypeError, KeyError):
                    continue
                if index_of(alert.get("alert_id")) is None:
                    continue  # another run's alert
                fire(request_type="alert", name="end_to_end", response_time=now_ms - ts,
                     response_length=len(message.value()), exception=None, context={})
            if not messages:
                gevent.sleep(IDLE_SLEEP_S)

    def close(self) -> None:
        self.running = False
        gevent.joinall(self.greenlets, timeout=2)
        deadline = time.monotonic() + 5
        while len(self.producer) and time.monotonic() < deadline:
            self.producer.poll(0)
            gevent.sleep(0.01)
        self.consumer.close()


_shared: dict[str, SharedKafka] = {}


@events.test_start.add_listener
def _start(environment, **_kwargs) -> None:
    if isinstance(environment.runner, MasterRunner) or "kafka" in _shared:
        return
    _shared["kafka"] = SharedKafka(environment)


@events.quitting.add_listener
def _quit(environment, **_kwargs) -> None:
    shared = _shared.pop("kafka", None)
    if shared is not None:
        shared.close()


class KafkaEventsUser(User):
    """Sends events at ``LOADGEN_USER_RATE`` per second; alerts are timed by SharedKafka."""

    wait_time = constant_throughput(USER_RATE)

    @task
    def send_event(self) -> None:
        _shared["kafka"].send()
