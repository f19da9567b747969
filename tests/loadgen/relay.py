"""TEST-ONLY stand-in for the appliance: real Kafka plumbing, rules applied in Python.

Loadgen's own end-to-end tests must not need a JVM, so they use something that behaves
like the appliance on the wire: this process consumes the events topic, validates each
record against the event shape (``appliance.events``), evaluates the example rules
(``loadgen.events.RULE_TEMPLATES``) in plain Python, and produces alerts and dead letters
in the product's formats (docs/appliance.md). It is not a mock of loadgen: loadgen talks
to it only through a real broker. The appliance's own suites run ``appliance run``.

Run: ``python tests/loadgen/relay.py --bootstrap B --events T --alerts T --dlq T``;
prints ``READY`` on stdout once it reads every partition; stops on SIGTERM or after
``--max-seconds``.
"""

from __future__ import annotations

import argparse
import base64
import json
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from confluent_kafka import Consumer, Producer  # noqa: E402

from appliance.events import FIELDS  # noqa: E402
from appliance.rules.rules_file import SEVERITIES  # noqa: E402
from loadgen.collector import end_offsets  # noqa: E402
from loadgen.events import matching_rules  # noqa: E402
from loadgen.kafka_config import consumer_config, producer_config  # noqa: E402


def check_event(value: bytes | None) -> tuple[dict | None, str | None]:
    """(event, None) if valid, else (None, reason)."""
    if value is None:
        return None, "empty record"
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError:
        return None, "not UTF-8"
    try:
        event = json.loads(text)
    except ValueError:
        return None, "not valid JSON"
    if not isinstance(event, dict):
        return None, "not a JSON object"
    for field in FIELDS:
        got = event.get(field.name)
        if got is None:
            if field.required:
                return None, f"missing field {field.name}"
        elif not field.accepts(got):
            return None, f"wrong type for field {field.name}"
    return event, None


def alert_for(event: dict) -> bytes | None:
    rules = matching_rules(event["metric"], event["value"])
    if not rules:
        return None
    top = max(rules, key=lambda r: SEVERITIES.index(r.severity))
    return json.dumps({
        "alert_id": event["event_id"], "event_id": event["event_id"],
        "source": event["source"], "metric": event["metric"], "value": event["value"],
        "ts": event["ts"], "severity": top.severity,
        "rules": [{"id": r.id, "severity": r.severity, "message": r.message} for r in rules],
    }).encode()


def dead_letter(message, reason: str) -> bytes:
    raw = message.value() or b""
    try:
        text, encoding = raw.decode("utf-8"), "utf8"
    except UnicodeDecodeError:
        text, encoding = base64.b64encode(raw).decode("ascii"), "base64"
    return json.dumps({"error": reason, "raw": text, "encoding": encoding,
                       "topic": message.topic(), "partition": message.partition(),
                       "offset": message.offset()}).encode()


def _copies(event_id: str, drop_every: int, duplicate_every: int) -> int:
    index = event_id.rpartition("-")[2]
    if not index.isdigit():
        return 1
    if drop_every and int(index) % drop_every == 0:
        return 0
    if duplicate_every and int(index) % duplicate_every == 0:
        return 2
    return 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--events", required=True)
    p.add_argument("--alerts", required=True)
    p.add_argument("--dlq", required=True)
    p.add_argument("--max-seconds", type=float, default=600.0)
    # Fault injection, so tests can check loadgen's accounting against known faults.
    p.add_argument("--drop-every", type=int, default=0,
                   help="never alert for events whose index is a multiple of N")
    p.add_argument("--duplicate-every", type=int, default=0,
                   help="send the alert twice for events whose index is a multiple of N")
    args = p.parse_args(argv)

    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    consumer = Consumer(consumer_config(args.bootstrap))
    producer = Producer(producer_config(args.bootstrap))
    consumer.assign(end_offsets(consumer, [args.events], args.bootstrap))
    producer.list_topics(args.alerts, timeout=10)
    print("READY", flush=True)
    deadline = time.monotonic() + args.max_seconds
    while not stopping and time.monotonic() < deadline:
        # consume() would wait for a full batch; poll() returns on the first record.
        first = consumer.poll(0.05)
        batch = [] if first is None else [first, *consumer.consume(999, 0)]
        for message in batch:
            if message.error() is not None:
                continue
            event, reason = check_event(message.value())
            if event is None:
                producer.produce(args.dlq, dead_letter(message, reason))
                continue
            alert = alert_for(event)
            if alert is None:
                continue
            copies = _copies(event["event_id"], args.drop_every, args.duplicate_every)
            for _ in range(copies):
                producer.produce(args.alerts, alert, key=event["event_id"].encode())
        producer.poll(0)
    producer.flush(10)
    consumer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
