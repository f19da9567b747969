"""Consumer-group members with a real Python client, run as a subprocess by the group tests.

    python group_member.py kafka-python|confluent BOOTSTRAP TOPIC GROUP ASSIGNOR SESSION_MS
                           MEMBERS [INSTANCE_ID]

Runs MEMBERS consumers (one thread each) subscribed to TOPIC in GROUP until SIGTERM (each
then closes and leaves the group) or SIGKILL (a crash). Each commits what it read after
every poll. Prints the lines tests/support/broker/group_harness.py parses (the Java members,
GroupMember.java, print the same):

    <k> OWNED <p,p,...>         its partitions after every rebalance callback
    <k> RECS <p> <first> <last>  offsets read in one poll, per partition
    <k> COMMIT <p> <offset>      a commit the coordinator acknowledged
    <k> COMMIT_FAILED <error>    a commit refused (a rebalance fenced it)
"""

from __future__ import annotations

import signal
import sys
import threading

_print_lock = threading.Lock()


def out(line: str) -> None:
    with _print_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def kafka_python_member(k: int, bootstrap: str, topic: str, group: str, assignor: str,
                        session_ms: int, instance: str | None, stop: threading.Event) -> None:
    from kafka import KafkaConsumer, OffsetAndMetadata
    from kafka.consumer.subscription_state import ConsumerRebalanceListener
    from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor

    assignors = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor,
                 "sticky": StickyPartitionAssignor,
                 "cooperative-sticky": CooperativeStickyAssignor}
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, group_id=group, client_id=f"kafka-python-member-{k}",
        partition_assignment_strategy=(assignors[assignor],), session_timeout_ms=session_ms,
        heartbeat_interval_ms=max(session_ms // 6, 500), enable_auto_commit=False,
        auto_offset_reset="earliest", fetch_max_wait_ms=100, metadata_max_age_ms=2000,
        reconnect_backoff_max_ms=500,
        group_instance_id=f"{instance}-{k}" if instance else None)

    def owned(leaving=()) -> str:  # once the callback's change is done
        return ",".join(str(p) for p in sorted(tp.partition for tp in consumer.assignment()
                                                if tp not in set(leaving)))

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked):
            out(f"{k} OWNED {owned(revoked)}")

        def on_partitions_assigned(self, assigned):
            out(f"{k} OWNED {owned()}")

        def on_partitions_lost(self, lost):
            out(f"{k} OWNED {owned(lost)}")

    consumer.subscribe([topic], listener=Listener())
    try:
        while not stop.is_set():
            batch = consumer.poll(timeout_ms=200)
            if not batch:
                continue
            commit = {}
            for tp, records in batch.items():
                out(f"{k} RECS {tp.partition} {records[0].offset} {records[-1].offset}")
                commit[tp] = OffsetAndMetadata(records[-1].offset + 1, "", -1)
            try:
                consumer.commit(commit)
            except Exception as exc:  # CommitFailedError, RebalanceInProgressError...
                out(f"{k} COMMIT_FAILED {type(exc).__name__}")
            else:
                for tp, om in commit.items():
                    out(f"{k} COMMIT {tp.partition} {om.offset}")
    finally:
        consumer.close()


def confluent_member(k: int, bootstrap: str, topic: str, group: str, assignor: str,
                     session_ms: int, instance: str | None, stop: threading.Event) -> None:
    import confluent_kafka as ck

    conf = {"bootstrap.servers": bootstrap, "group.id": group,
            "client.id": f"confluent-member-{k}", "partition.assignment.strategy": assignor,
            "session.timeout.ms": session_ms,
            "heartbeat.interval.ms": max(session_ms // 6, 500), "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "fetch.wait.max.ms": 100,
            "topic.metadata.refresh.interval.ms": 2000, "reconnect.backoff.max.ms": 500}
    if instance:
        conf["group.instance.id"] = f"{instance}-{k}"
    consumer = ck.Consumer(conf)

    def owned(c) -> str:
        return ",".join(str(p) for p in sorted(tp.partition for tp in c.assignment()))

    cooperative = assignor == "cooperative-sticky"  # librdkafka's incremental protocol

    def on_assign(c, partitions):
        if cooperative:
            c.incremental_assign(partitions)
        else:
            c.assign(partitions)
        out(f"{k} OWNED {owned(c)}")

    def on_revoke(c, partitions):
        if cooperative:
            c.incremental_unassign(partitions)
        else:
            c.unassign()
        out(f"{k} OWNED {owned(c)}")

    consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke)
    try:
        while not stop.is_set():
            msgs = consumer.consume(num_messages=500, timeout=0.2)
            msgs = [m for m in msgs if m.error() is None]
            if not msgs:
                continue
            ranges: dict[int, list[int]] = {}
            for m in msgs:
                r = ranges.setdefault(m.partition(), [m.offset(), m.offset()])
                r[0], r[1] = min(r[0], m.offset()), max(r[1], m.offset())
            for p, (first, last) in sorted(ranges.items()):
                out(f"{k} RECS {p} {first} {last}")
            offsets = [ck.TopicPartition(topic, p, last + 1)
                       for p, (_first, last) in ranges.items()]
            try:
                done = consumer.commit(offsets=offsets, asynchronous=False)
            except ck.KafkaException as exc:
                out(f"{k} COMMIT_FAILED {exc.args[0].name()}")
                continue
            for tp in done:
                if tp.error is None:
                    out(f"{k} COMMIT {tp.partition} {tp.offset}")
                else:
                    out(f"{k} COMMIT_FAILED {tp.error.name()}")
    finally:
        consumer.close()


def main(argv: list[str]) -> int:
    client, bootstrap, topic, group, assignor, session_ms, members = argv[:7]
    instance = argv[7] if len(argv) > 7 else None
    run = {"kafka-python": kafka_python_member, "confluent": confluent_member}[client]
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    threads = [threading.Thread(target=run, args=(k, bootstrap, topic, group, assignor,
                                                  int(session_ms), instance, stop))
               for k in range(int(members))]
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        for t in threads:
            t.join(0.2)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
