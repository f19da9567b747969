"""One consumer-group member for ``bench.broker_group_churn``, run as its own process.

    python -m bench._churn_member BOOTSTRAP TOPIC GROUP PROTOCOL RECORDS_FILE

PROTOCOL is ``consumer`` (KIP-848: the broker assigns), ``cooperative-sticky`` or ``range``
(the classic protocol, incremental or eager). A real librdkafka consumer (confluent-kafka),
auto-commit on, as group consumers usually run: so the duplicates the bench counts are the
ones such a consumer really gets back after a rebalance or a crash.

Why a file and not stdout for the records: at 10,000 records/s a line per record would cost
more than the consuming. Every consumed record is appended to RECORDS_FILE as
``RECORD`` (partition, offset, the producer's send time, the receive time; nanoseconds
since the epoch, one clock: one machine), written through at every poll, so what a
``kill -9`` ends is still on disk. Stdout carries what the bench waits on, stamped with the
wall clock:

    START <ns>            just before subscribe(): a join counts from here
    OWNED <ns> <p,p,...>  what the member owns after every rebalance callback

SIGTERM closes the consumer (it leaves the group, committing first); SIGKILL is a crash.
"""

from __future__ import annotations

import signal
import struct
import sys
import threading
import time

import confluent_kafka as ck

RECORD = struct.Struct("<iqqq")  # partition, offset, send ns, receive ns
VALUE = struct.Struct("<qq")  # the producer's sequence number and send time (ns)
PROTOCOLS = ("consumer", "cooperative-sticky", "range")
# The classic members' timeouts (KIP-848 members get theirs from the broker's flags).
CLASSIC_SESSION_MS = 6000
CLASSIC_HEARTBEAT_MS = 1000
AUTO_COMMIT_MS = 1000


def config(bootstrap: str, group: str, protocol: str) -> dict:
    conf = {"bootstrap.servers": bootstrap, "group.id": group,
            "auto.offset.reset": "earliest", "enable.auto.commit": True,
            "auto.commit.interval.ms": AUTO_COMMIT_MS, "fetch.wait.max.ms": 100,
            "topic.metadata.refresh.interval.ms": 2000, "reconnect.backoff.max.ms": 500}
    if protocol == "consumer":
        return {**conf, "group.protocol": "consumer"}
    return {**conf, "group.protocol": "classic", "partition.assignment.strategy": protocol,
            "session.timeout.ms": CLASSIC_SESSION_MS,
            "heartbeat.interval.ms": CLASSIC_HEARTBEAT_MS}


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def run(bootstrap: str, topic: str, group: str, protocol: str, records_path: str) -> int:
    if protocol not in PROTOCOLS:
        print(f"_churn_member: protocol {protocol!r} is not one of {PROTOCOLS}",
              file=sys.stderr)
        return 2
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    consumer = ck.Consumer(config(bootstrap, group, protocol))
    incremental = protocol != "range"  # KIP-848 and cooperative-sticky hand over piecemeal

    def owned(c: ck.Consumer) -> None:
        parts = ",".join(str(p) for p in sorted(tp.partition for tp in c.assignment()))
        say(f"OWNED {time.time_ns()} {parts}")

    def on_assign(c: ck.Consumer, partitions: list) -> None:
        if incremental:
            c.incremental_assign(partitions)
        else:
            c.assign(partitions)
        owned(c)

    def on_revoke(c: ck.Consumer, partitions: list) -> None:
        if incremental:
            c.incremental_unassign(partitions)
        else:
            c.unassign()
        owned(c)

    with open(records_path, "ab", buffering=0) as out:
        say(f"START {time.time_ns()}")
        consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke,
                           on_lost=on_revoke)
        try:
            while not stop.is_set():
                # consume(n, timeout) would wait for n records or the timeout, whichever
                # comes last: wait for one, then take what else is already there.
                one = consumer.poll(0.1)
                if one is None:
                    continue
                msgs = [one, *consumer.consume(num_messages=1000, timeout=0)]
                now = time.time_ns()
                chunk = [RECORD.pack(m.partition(), m.offset(), VALUE.unpack_from(m.value())[1],
                                     now)
                         for m in msgs if m.error() is None]
                if chunk:
                    out.write(b"".join(chunk))
        finally:
            consumer.close()
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 6:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        sys.exit(2)
    sys.exit(run(*sys.argv[1:]))
