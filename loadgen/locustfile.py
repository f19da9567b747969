"""Locust: drive the appliance interactively with the same events as ``loadgen run``.

    locust -f loadgen/locustfile.py --headless -u 10 -r 5 -t 30s --bootstrap-server 127.0.0.1:9092
    locust -f loadgen/locustfile.py --bootstrap-server 127.0.0.1:9092   # web UI, :8089

``--bootstrap-server`` is the Kafka address (Locust's own ``--host`` still works when it is
not given). Each user sends events at ``--user-rate`` per second; ``--alert-ratio`` of them
match an example rule (the same default as ``loadgen run``'s) and ``--bad-ratio`` are
malformed (Locust custom arguments: on the command line, in the web UI's form, or from
the environment as ``LOADGEN_BOOTSTRAP_SERVER``, ``LOADGEN_USER_RATE``,
``LOADGEN_ALERT_RATIO``, ``LOADGEN_BAD_RATIO``, ``LOADGEN_ALERT_TIMEOUT``; defined in
``loadgen.locust_args``). Locust prints ``--help`` before it loads this file, so
``python -m loadgen.locust_cli --help`` (Locust with this file loaded first) lists them.
Locust shows three request types:

* ``kafka`` / ``produce``: time until the broker acknowledged the event;
* ``alert`` / ``end_to_end``: event time stamp to its alert consumed from the alerts
  topic;
* ``dead_letter`` / ``end_to_end``: a malformed event's send to its dead letter consumed;

both answers are timed by one shared consumer per Locust process. An answer that is not
read back within ``--alert-timeout`` (default 10s) is a failure of its row ("no alert
within 10s"), in the table, the web UI and the CSV; at the test's stop the answers still
due are waited for until their time is up. A headless run whose only failures are such
missing answers exits 3, as ``loadgen run`` does when alerts are lost.

A test starts only against a Kafka that answers and has the three topics: otherwise it
stops at once with one line naming the address and the cause (headless: exit code 1)
instead of running its users into errors.

Locust paces users closed-loop (``wait_time``), so its tails are indicative only; the
open-loop numbers free of coordinated omission come from ``loadgen run``. Locust runs on
gevent: confluent-kafka's calls here never block (``poll(0)``, ``consume(timeout=0)``),
and two greenlets serve delivery reports and answers, yielding between polls.
Topics: ``LOADGEN_EVENTS_TOPIC`` (events), ``LOADGEN_ALERTS_TOPIC`` (alerts),
``LOADGEN_DLQ_TOPIC`` (events.dlq).
TLS/SASL: ``LOADGEN_KAFKA_CONFIG`` names a TOML file whose ``[kafka]`` table holds the
security settings (an ``appliance.toml`` works; ``APPLIANCE_KAFKA_*`` override), as for
``loadgen run --kafka-config``; secrets never go on Locust's command line.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import secrets
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import gevent
from confluent_kafka import Consumer, KafkaException, Producer
from locust import User, constant_throughput, events, stats, task
from locust.exception import StopTest
from locust.runners import MasterRunner

try:
    import loadgen  # noqa: F401
except ImportError:  # a checkout that is not pip-installed: Locust only adds loadgen/
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import loadgen.locust_args  # noqa: E402,F401 - adds the project's flags to Locust's
import loadgen.locust_csv  # noqa: E402,F401 - its CSV writer ends quietly at exit
from appliance.command_tree import EXIT_LOST  # noqa: E402
from appliance.durations import parse_seconds  # noqa: E402
from loadgen.config import APPLIANCE_TOPICS  # noqa: E402
from loadgen.events import ALERT_KINDS, BAD_KINDS, EventFactory  # noqa: E402
from loadgen.kafka_config import (  # noqa: E402
    KafkaConfigError,
    consumer_config,
    load_security,
    producer_config,
)
from loadgen.kafka_ready import KafkaNotReady, answer_offsets  # noqa: E402

EVENTS_TOPIC = os.environ.get("LOADGEN_EVENTS_TOPIC", APPLIANCE_TOPICS.events)
ALERTS_TOPIC = os.environ.get("LOADGEN_ALERTS_TOPIC", APPLIANCE_TOPICS.alerts)
DLQ_TOPIC = os.environ.get("LOADGEN_DLQ_TOPIC", APPLIANCE_TOPICS.dead_letters)
IDLE_SLEEP_S = 0.001
# How long the start-up check waits for Kafka: the whole stop must come within ~10 s.
PREFLIGHT_TIMEOUT_S = 5.0
EXPIRY_CHECK_S = 0.2

# StopTest is how a locustfile stops a test: Locust's own handler logs its message as one
# line and stops (headless: quits). Raised from the greenlet that starts the test, gevent's
# hub would print a traceback for it as well.
_hub = gevent.get_hub()
_hub.NOT_ERROR = (*_hub.NOT_ERROR, StopTest)


@dataclass(frozen=True)
class LoadSettings:
    """The custom arguments of one test, checked before it starts."""

    user_rate: float
    alert_ratio: float
    bad_ratio: float
    alert_timeout_s: float

    @classmethod
    def of(cls, options) -> LoadSettings:
        try:
            timeout_s = parse_seconds(str(options.alert_timeout))
        except ValueError as exc:
            raise ValueError(f"--alert-timeout {exc}") from None
        if not timeout_s > 0:
            raise ValueError(f"--alert-timeout must be more than 0 (got "
                             f"{options.alert_timeout!r})")
        settings = cls(float(options.user_rate), float(options.alert_ratio),
                       float(options.bad_ratio), timeout_s)
        if not settings.user_rate > 0:
            raise ValueError(f"--user-rate must be positive (got {settings.user_rate:g})")
        for name in ("alert_ratio", "bad_ratio"):
            if not 0 <= getattr(settings, name) <= 1:
                raise ValueError(f"--{name.replace('_', '-')} must be within [0, 1] "
                                 f"(got {getattr(settings, name):g})")
        if settings.alert_ratio + settings.bad_ratio > 1:
            raise ValueError("--alert-ratio plus --bad-ratio must not exceed 1")
        return settings


class MissingAnswer(Exception):
    """An alert or dead letter not read back in time: Locust's failure for its row."""


@dataclass(frozen=True)
class Pending:
    """An answer the appliance owes: for which row, when its event was sent, and until
    when it may come."""

    kind: str  # "alert" | "dead_letter"
    sent_ms: float  # wall clock, as the event's time stamp
    due: float  # time.monotonic() deadline


class SharedKafka:
    """One producer and one answer consumer per Locust process and test, shared by its
    users. Opening it checks that Kafka answers and has the topics (KafkaNotReady)."""

    def __init__(self, environment, settings: LoadSettings) -> None:
        bootstrap = getattr(environment.parsed_options, "bootstrap_server", "") \
            or environment.host
        if not bootstrap:
            raise KafkaNotReady("pass the Kafka address as --bootstrap-server "
                                "(e.g. --bootstrap-server 127.0.0.1:9092)")
        self.environment = environment
        self.settings = settings
        self.factory = EventFactory("lc" + secrets.token_hex(4), settings.alert_ratio,
                                    settings.bad_ratio)
        self.counter = itertools.count()
        # Answers owed, by event index, in send order (so in order of their deadlines).
        self.pending: dict[int, Pending] = {}
        try:
            security = load_security(None)  # from $LOADGEN_KAFKA_CONFIG, if set
        except KafkaConfigError as exc:
            raise KafkaNotReady(f"LOADGEN_KAFKA_CONFIG: {exc}") from None
        errors: list = []  # what librdkafka reports while the check runs
        self.consumer = Consumer({**consumer_config(bootstrap, security=security),
                                  "error_cb": errors.append})
        try:
            self.consumer.assign(answer_offsets(
                self.consumer, bootstrap, EVENTS_TOPIC, [ALERTS_TOPIC, DLQ_TOPIC],
                PREFLIGHT_TIMEOUT_S, errors))
        except KafkaNotReady:
            self.consumer.close()
            raise
        # Every delivery report is a Locust "produce" sample, not only the failures.
        self.producer = Producer({**producer_config(bootstrap, security=security),
                                  "delivery.report.only.error": False})
        self.running = True
        self.greenlets = [gevent.spawn(self._serve_deliveries), gevent.spawn(self._watch),
                          gevent.spawn(self._expire_loop)]

    def send(self) -> None:
        i = next(self.counter)
        sent_ms = time.time() * 1000.0
        payload = self.factory.encode(i, sent_ms)
        started = time.perf_counter()
        fire = self.environment.events.request.fire
        kind = self.factory.kind(i)
        answer = ("alert" if kind in ALERT_KINDS else
                  "dead_letter" if kind in BAD_KINDS else None)
        if answer is not None:
            self.pending[i] = Pending(answer, sent_ms,
                                      time.monotonic() + self.settings.alert_timeout_s)

        def on_delivery(err, _msg) -> None:
            if err is not None:  # never reached Kafka: no answer is owed
                self.pending.pop(i, None)
            fire(request_type="kafka", name="produce",
                 response_time=(time.perf_counter() - started) * 1000.0,
                 response_length=len(payload),
                 exception=None if err is None else KafkaException(err), context={})

        try:
            self.producer.produce(EVENTS_TOPIC, payload, on_delivery=on_delivery)
        except (BufferError, KafkaException) as exc:
            self.pending.pop(i, None)
            fire(request_type="kafka", name="produce", response_time=0.0,
                 response_length=0, exception=exc, context={})
        self.producer.poll(0)

    def _serve_deliveries(self) -> None:
        while self.running:
            self.producer.poll(0)
            gevent.sleep(IDLE_SLEEP_S)

    def _watch(self) -> None:
        while self.running:
            messages = self.consumer.consume(500, 0)
            for message in messages:
                if message.error() is None:
                    self._answer(message)
            if not messages:
                gevent.sleep(IDLE_SLEEP_S)

    def _answer(self, message) -> None:
        now_ms = time.time() * 1000.0
        value = message.value()
        try:
            answer = json.loads(value)
        except (ValueError, TypeError):
            return
        if not isinstance(answer, dict):
            return
        if message.topic() == DLQ_TOPIC:
            try:
                raw = answer["raw"]
                raw = (base64.b64decode(raw) if answer.get("encoding") == "base64"
                       else raw.encode("utf-8"))
            except (KeyError, TypeError, AttributeError, ValueError):
                return
            owed = self._owed(self.factory.index_in_raw(raw), "dead_letter")
            if owed is not None:
                self._fire("dead_letter", now_ms - owed.sent_ms, len(value))
            return
        # Another run's alert, a duplicate (at-least-once), or one already counted missing.
        owed = self._owed(self.factory.index_of(answer.get("alert_id")), "alert")
        if owed is not None:
            self._fire("alert", now_ms - owed.sent_ms, len(value))

    def _owed(self, index: int | None, kind: str) -> Pending | None:
        """The answer owed for event ``index``, now paid (None if none was owed)."""
        if index is None:
            return None
        owed = self.pending.get(index)
        if owed is None or owed.kind != kind:
            return None
        del self.pending[index]
        return owed

    def _expire(self, now: float) -> None:
        """Every answer whose time is up: a failure of its row."""
        while self.pending:
            index, owed = next(iter(self.pending.items()))
            if owed.due > now:
                return
            del self.pending[index]
            what = "alert" if owed.kind == "alert" else "dead letter"
            self.environment.events.request.fire(
                request_type=owed.kind, name="end_to_end",
                response_time=self.settings.alert_timeout_s * 1000.0, response_length=0,
                exception=MissingAnswer(f"no {what} within "
                                        f"{self.settings.alert_timeout_s:g} s"),
                context={})

    def _expire_loop(self) -> None:
        while self.running:
            self._expire(time.monotonic())
            gevent.sleep(EXPIRY_CHECK_S)

    def settle(self) -> None:
        """At the stop: wait for the answers still owed until their time is up (the
        watcher keeps reading), then count what did not come."""
        while self.pending:
            last_due = max(owed.due for owed in self.pending.values())
            if time.monotonic() >= last_due:
                break
            gevent.sleep(0.05)
        self._expire(float("inf"))

    def _fire(self, request_type: str, response_time: float, length: int) -> None:
        self.environment.events.request.fire(
            request_type=request_type, name="end_to_end", response_time=response_time,
            response_length=length, exception=None, context={})

    def close(self) -> None:
        self.settle()
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
    """Open Kafka for this test; a Kafka that is not ready stops the test at once."""
    if isinstance(environment.runner, MasterRunner):
        return
    _close()
    try:
        settings = LoadSettings.of(environment.parsed_options)
        _shared["kafka"] = SharedKafka(environment, settings)
    except (KafkaNotReady, ValueError) as exc:
        if environment.parsed_options is not None and environment.parsed_options.headless:
            environment.process_exit_code = 1
        # Locust logs StopTest's message as one line and stops (headless: quits).
        raise StopTest(f"loadgen/locustfile.py: {exc}") from None


def _close() -> None:
    shared = _shared.pop("kafka", None)
    if shared is not None:
        shared.close()


@events.test_stop.add_listener
def _stop(**_kwargs) -> None:
    _close()


@events.quitting.add_listener
def _quit(environment=None, **_kwargs) -> None:
    _close()
    if environment is None:
        return
    if getattr(environment.parsed_options, "csv_prefix", None):
        # Locust writes its CSV once an interval and not at exit: let it write the
        # answers the stop counted as missing.
        gevent.sleep(stats.CSV_STATS_INTERVAL_SEC + 0.2)
    if environment.process_exit_code is not None:
        return
    rows = environment.stats.entries
    missing = sum(row.num_failures for key, row in rows.items() if key[0] == "end_to_end")
    produce = rows.get(("produce", "kafka"))
    if missing and (produce is None or produce.num_failures == 0):
        environment.process_exit_code = EXIT_LOST  # answers lost, nothing else failed


class KafkaEventsUser(User):
    """Sends events at ``--user-rate`` per second; answers are timed by SharedKafka."""

    def wait_time(self) -> float:
        return self._pace(self)

    def on_start(self) -> None:
        self._pace = constant_throughput(_shared["kafka"].settings.user_rate)

    @task
    def send_event(self) -> None:
        _shared["kafka"].send()
