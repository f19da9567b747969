"""Source options behave as in Spark's kafka source: where reading starts, which
partitions are read, how much a trigger admits, and what happens when offsets vanish."""

from __future__ import annotations

import json
import uuid

import pytest
from kafka.admin import KafkaAdminClient, NewPartitions
from pyspark.errors import StreamingQueryException

from support.connector.connector_helpers import (
    produce,
    read_topic,
    rows_as_recs,
    wait_for_records,
    wait_until,
)

pytestmark = pytest.mark.spark


def source(spark, broker, **options):
    reader = (spark.readStream.format("appliance-kafka")
              .option("kafka.bootstrap.servers", broker.bootstrap)
              .option("includeHeaders", "true"))
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def drain(df, checkpoint: str, queries: list, timeout_s: float = 90):
    """Runs an availableNow query into a memory table; returns (rows, query)."""
    name = "t_" + uuid.uuid4().hex[:10]
    q = (df.writeStream.format("memory").queryName(name)
         .option("checkpointLocation", checkpoint)
         .trigger(availableNow=True).start())
    queries.append(q)
    _finish(q, timeout_s)
    return df.sparkSession.table(name).collect(), q


def relay(df, broker, sink: str, checkpoint: str, queries: list, timeout_s: float = 90):
    """Runs an availableNow query into topic ``sink`` (a sink that can resume from a
    checkpoint, unlike the memory sink); returns the query."""
    q = (df.selectExpr("key", "value", "headers").writeStream.format("appliance-kafka")
         .option("kafka.bootstrap.servers", broker.bootstrap).option("topic", sink)
         .option("checkpointLocation", checkpoint)
         .trigger(availableNow=True).start())
    queries.append(q)
    _finish(q, timeout_s)
    return q


def _finish(q, timeout_s: float) -> None:
    assert q.awaitTermination(timeout_s), "availableNow query did not finish"
    if q.exception() is not None:
        raise q.exception()


def test_starting_offsets_earliest_reads_everything(spark, broker, new_topic, checkpoint, queries):
    topic = new_topic(2)
    sent = produce(broker.bootstrap, topic, "e", 30)
    rows, _ = drain(source(spark, broker, subscribe=topic, startingOffsets="earliest"),
                    checkpoint, queries)
    assert sorted(rows_as_recs(rows), key=lambda r: r.value) == sorted(sent, key=lambda r: r.value)
    # columns of Spark's kafka source, with their meaning
    r = rows[0]
    assert r["topic"] == topic and r["partition"] in (0, 1) and r["offset"] >= 0
    assert r["timestampType"] == 0 and r["timestamp"] is not None


def test_starting_offsets_latest_skips_existing_and_survives_restart(spark, broker, new_topic,
                                                                     checkpoint, queries):
    topic, sink = new_topic(2), new_topic(2)
    produce(broker.bootstrap, topic, "old", 10)
    relay(source(spark, broker, subscribe=topic, startingOffsets="latest"), broker, sink,
          checkpoint, queries)
    assert read_topic(broker.bootstrap, sink) == []
    new = produce(broker.bootstrap, topic, "new", 6)
    relay(source(spark, broker, subscribe=topic, startingOffsets="latest"), broker, sink,
          checkpoint, queries)
    assert sorted(read_topic(broker.bootstrap, sink), key=lambda r: r.value) == sorted(
        new, key=lambda r: r.value)


def test_starting_offsets_json_per_partition(spark, broker, new_topic, checkpoint, queries):
    topic = new_topic(2)
    produce(broker.bootstrap, topic, "j", 20)  # 10 per partition, offsets 0..9
    start = json.dumps({topic: {"0": 7, "1": -2}})
    rows, _ = drain(source(spark, broker, subscribe=topic, startingOffsets=start),
                    checkpoint, queries)
    by_partition = {p: sorted(r["offset"] for r in rows if r["partition"] == p) for p in (0, 1)}
    assert by_partition == {0: [7, 8, 9], 1: list(range(10))}


def test_subscribe_pattern_reads_only_matching_topics(spark, broker, new_topic, checkpoint,
                                                      queries):
    prefix = "pat" + uuid.uuid4().hex[:6]
    broker.create_topics({f"{prefix}-a": 2, f"{prefix}-b": 1, f"other-{prefix}": 2})
    a = produce(broker.bootstrap, f"{prefix}-a", "a", 6)
    b = produce(broker.bootstrap, f"{prefix}-b", "b", 4, partitions=1)
    produce(broker.bootstrap, f"other-{prefix}", "x", 5)
    rows, _ = drain(source(spark, broker, subscribePattern=f"{prefix}-.*",
                           startingOffsets="earliest"), checkpoint, queries)
    assert {r["topic"] for r in rows} == {f"{prefix}-a", f"{prefix}-b"}
    assert set(rows_as_recs(rows)) == set(a + b)


def test_assign_reads_only_the_given_partitions(spark, broker, new_topic, checkpoint, queries):
    topic = new_topic(2)
    sent = produce(broker.bootstrap, topic, "as", 10)
    rows, _ = drain(source(spark, broker, assign=json.dumps({topic: [1]}),
                           startingOffsets="earliest"), checkpoint, queries)
    assert {r["partition"] for r in rows} == {1}
    assert set(rows_as_recs(rows)) == {r for i, r in enumerate(sent) if i % 2 == 1}


def test_max_offsets_per_trigger_caps_every_batch(spark, broker, new_topic, checkpoint, queries):
    topic = new_topic(2)
    produce(broker.bootstrap, topic, "m", 45)
    rows, q = drain(source(spark, broker, subscribe=topic, startingOffsets="earliest",
                           maxOffsetsPerTrigger="10"), checkpoint, queries)
    assert len(rows) == 45
    sizes = [p["numInputRows"] for p in q.recentProgress if p["numInputRows"] > 0]
    assert sizes == [10, 10, 10, 10, 5]
    metrics = q.recentProgress[-1]["sources"][0]["metrics"]
    assert metrics["maxOffsetsBehindLatest"] == "0"
    assert {"minOffsetsBehindLatest", "avgOffsetsBehindLatest"} <= set(metrics)


def test_available_now_stops_at_the_offsets_seen_when_it_started(spark, broker, new_topic,
                                                                 checkpoint, queries):
    topic, sink = new_topic(2), new_topic(2)
    first = produce(broker.bootstrap, topic, "n", 12)
    q = relay(source(spark, broker, subscribe=topic, startingOffsets="earliest"), broker, sink,
              checkpoint, queries)
    assert not q.isActive
    assert sorted(read_topic(broker.bootstrap, sink), key=lambda r: r.value) == sorted(
        first, key=lambda r: r.value)
    second = produce(broker.bootstrap, topic, "n2", 4)
    q = relay(source(spark, broker, subscribe=topic, startingOffsets="earliest"), broker, sink,
              checkpoint, queries)
    # only what arrived since the checkpointed end is read again
    assert sum(p["numInputRows"] for p in q.recentProgress) == 4
    assert set(read_topic(broker.bootstrap, sink)) == set(first + second)


def _recreate(broker, topic: str) -> None:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.delete_topics([topic])
    finally:
        admin.close()
    broker.create_topics({topic: 2})


def test_fail_on_data_loss_true_fails_when_a_topic_is_recreated(spark, broker, new_topic,
                                                               checkpoint, queries):
    topic, sink = new_topic(2), new_topic(2)
    produce(broker.bootstrap, topic, "d", 20)
    relay(source(spark, broker, subscribe=topic, startingOffsets="earliest"), broker, sink,
          checkpoint, queries)
    _recreate(broker, topic)
    produce(broker.bootstrap, topic, "d2", 4)
    with pytest.raises(StreamingQueryException, match="failOnDataLoss"):
        relay(source(spark, broker, subscribe=topic, startingOffsets="earliest"), broker, sink,
              checkpoint, queries)


def test_fail_on_data_loss_false_skips_and_reads_the_new_records(spark, broker, new_topic,
                                                                 checkpoint, queries):
    topic, sink = new_topic(2), new_topic(2)
    old = produce(broker.bootstrap, topic, "d", 20)
    relay(source(spark, broker, subscribe=topic, startingOffsets="earliest",
                 failOnDataLoss="false"), broker, sink, checkpoint, queries)
    _recreate(broker, topic)
    new = produce(broker.bootstrap, topic, "d2", 4)
    q = relay(source(spark, broker, subscribe=topic, startingOffsets="earliest",
                     failOnDataLoss="false"), broker, sink, checkpoint, queries)
    assert set(read_topic(broker.bootstrap, sink)) == set(old + new)
    skipped = [int(p["sources"][0]["metrics"]["dataLossEventsSkipped"]) for p in q.recentProgress]
    assert max(skipped) >= 1


def test_continuous_query_picks_up_partitions_added_while_running(spark, broker, new_topic,
                                                                  checkpoint, queries):
    """Grows 1 -> 2 partitions: local[2] has exactly two task slots for continuous readers."""
    src, sink = new_topic(1), new_topic(2)
    first = produce(broker.bootstrap, src, "p0", 5, partitions=1)
    q = (source(spark, broker, subscribe=src, startingOffsets="earliest")
         .selectExpr("key", "value", "headers").writeStream.format("appliance-kafka")
         .option("kafka.bootstrap.servers", broker.bootstrap).option("topic", sink)
         .option("checkpointLocation", checkpoint).trigger(continuous="1 second").start())
    queries.append(q)
    wait_for_records(broker.bootstrap, sink, first, query=q)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.create_partitions({src: NewPartitions(total_count=2)})
    finally:
        admin.close()
    grown = produce(broker.bootstrap, src, "p01", 10, partitions=2)  # odd i -> new partition 1
    wait_for_records(broker.bootstrap, sink, first + grown, query=q)
    assert q.isActive and q.exception() is None
    q.stop()


def test_min_offsets_per_trigger_holds_batches_until_enough_offsets(spark, broker, new_topic,
                                                                    checkpoint, queries):
    topic, sink = new_topic(2), new_topic(2)
    few = produce(broker.bootstrap, topic, "few", 5)
    # idle triggers report progress every 10 s by default; make them visible sooner
    spark.conf.set("spark.sql.streaming.noDataProgressEventInterval", "200ms")
    try:
        q = _min_rows_relay(spark, broker, topic, sink, checkpoint)
    finally:
        spark.conf.unset("spark.sql.streaming.noDataProgressEventInterval")
    queries.append(q)
    # several triggers pass with only 5 new offsets: nothing is admitted
    wait_until(lambda: len(q.recentProgress) >= 3, "three trigger evaluations", query=q)
    assert sum(p["numInputRows"] for p in q.recentProgress) == 0
    more = produce(broker.bootstrap, topic, "more", 20)
    wait_for_records(broker.bootstrap, sink, few + more, query=q)
    # the batch's progress is reported just after its records are committed
    wait_until(lambda: any(p["numInputRows"] for p in q.recentProgress), "batch progress", query=q)
    sizes = [p["numInputRows"] for p in q.recentProgress if p["numInputRows"] > 0]
    assert sizes[0] >= 20
    q.stop()


def _min_rows_relay(spark, broker, topic, sink, checkpoint):
    return (source(spark, broker, subscribe=topic, startingOffsets="earliest",
                minOffsetsPerTrigger="20", maxTriggerDelay="1h")
         .selectExpr("key", "value", "headers").writeStream.format("appliance-kafka")
         .option("kafka.bootstrap.servers", broker.bootstrap).option("topic", sink)
         .option("checkpointLocation", checkpoint)
         .trigger(processingTime="100 milliseconds").start())


def test_continuous_query_picks_up_a_new_topic_matching_its_pattern(spark, broker, new_topic,
                                                                    checkpoint, queries):
    """One 1-partition topic, then a second one appears: 2 partitions, 2 task slots."""
    prefix = "grow" + uuid.uuid4().hex[:6]
    sink = new_topic(2)
    broker.create_topics({f"{prefix}-a": 1})
    first = produce(broker.bootstrap, f"{prefix}-a", "a", 5, partitions=1)
    q = (source(spark, broker, subscribePattern=f"{prefix}-.*", startingOffsets="earliest")
         .selectExpr("key", "value", "headers").writeStream.format("appliance-kafka")
         .option("kafka.bootstrap.servers", broker.bootstrap).option("topic", sink)
         .option("checkpointLocation", checkpoint).trigger(continuous="1 second").start())
    queries.append(q)
    wait_for_records(broker.bootstrap, sink, first, query=q)
    broker.create_topics({f"{prefix}-b": 1})
    second = produce(broker.bootstrap, f"{prefix}-b", "b", 5, partitions=1)
    wait_for_records(broker.bootstrap, sink, first + second, query=q)
    assert q.isActive and q.exception() is None
    q.stop()
