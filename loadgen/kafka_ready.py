"""Is the Kafka a load run points at ready for it: does it answer, and does it have the
topics? Asked once, before any load, so an interactive run (Locust) stops at once with one
line naming the address and the cause instead of failing every request it sends.

A refused connection or an unknown host name is known within milliseconds (librdkafka
reports it to the client's ``error_cb``), so the check gives up on those at once rather
than waiting out its timeout, which is left for an address that does not answer at all.
(``error_cb`` runs only inside ``poll``: the check polls between its metadata requests.)
"""

from __future__ import annotations

import time

from loadgen.collector import BrokerUnavailable, end_offsets

SLICE_S = 0.25  # how often the metadata request looks at the errors reported meanwhile


class KafkaNotReady(RuntimeError):
    """``str()`` is one line naming the address and the cause."""


def _definitive(error) -> bool:
    """A client error that waiting will not cure: every broker refused, or the name does
    not resolve, or authentication failed."""
    from confluent_kafka import KafkaError

    return error.code() in (KafkaError._ALL_BROKERS_DOWN, KafkaError._RESOLVE,
                            KafkaError._AUTHENTICATION)


def _cause(exc: Exception, errors: list) -> str:
    """The most telling words: the first error librdkafka reported, else the exception's."""
    if errors:
        return errors[0].str()
    error = exc.args[0] if exc.args else None
    return error.str() if error is not None and hasattr(error, "str") else str(exc)


def _metadata(consumer, bootstrap: str, timeout: float, errors: list):
    from confluent_kafka import KafkaException

    deadline = time.monotonic() + timeout
    while True:
        try:
            return consumer.list_topics(timeout=max(0.01, min(SLICE_S,
                                                              deadline - time.monotonic())))
        except KafkaException as exc:
            consumer.poll(0)  # serves error_cb (nothing is assigned yet: no records)
            if time.monotonic() >= deadline or any(_definitive(e) for e in errors):
                raise KafkaNotReady(f"cannot reach Kafka at {bootstrap}: "
                                    f"{_cause(exc, errors)}") from None


def answer_offsets(consumer, bootstrap: str, events_topic: str, answer_topics: list[str],
                   timeout: float, errors: list | None = None) -> list:
    """Check that ``bootstrap`` answers within ``timeout`` s and has ``events_topic`` and
    ``answer_topics``; the answer topics' partitions at their end offsets (``assign``).
    ``errors``: the list the consumer's ``error_cb`` appends to."""
    metadata = _metadata(consumer, bootstrap, timeout, errors if errors is not None else [])
    wanted = [events_topic, *answer_topics]
    missing = [t for t in wanted if t not in metadata.topics
               or metadata.topics[t].error is not None or not metadata.topics[t].partitions]
    if missing:
        raise KafkaNotReady(f"topics missing on Kafka at {bootstrap}: {', '.join(missing)} "
                            f"(the appliance creates them when it starts)")
    try:
        return end_offsets(consumer, answer_topics, bootstrap, timeout)
    except BrokerUnavailable as exc:
        raise KafkaNotReady(str(exc)) from None
