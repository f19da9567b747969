"""The same query text runs with format("kafka"): Spark's own connector is absent here, so
the short name resolves to appliance-kafka's alias provider. Batch read and write too."""

from __future__ import annotations

import json

import pytest

from support.connector.connector_helpers import produce, read_topic, rows_as_recs

pytestmark = pytest.mark.spark


def test_kafka_short_name_runs_the_same_streaming_query(spark, broker, new_topic, checkpoint,
                                                        queries):
    src, sink = new_topic(2), new_topic(2)
    sent = produce(broker.bootstrap, src, "alias", 20)
    df = (spark.readStream.format("kafka")
          .option("kafka.bootstrap.servers", broker.bootstrap)
          .option("subscribe", src)
          .option("startingOffsets", "earliest")
          .option("includeHeaders", "true")
          .option("maxOffsetsPerTrigger", "8")
          .load())
    q = (df.selectExpr("key", "value", "headers").writeStream.format("kafka")
         .option("kafka.bootstrap.servers", broker.bootstrap)
         .option("topic", sink)
         .option("checkpointLocation", checkpoint)
         .trigger(availableNow=True)
         .start())
    queries.append(q)
    assert q.awaitTermination(90)
    assert q.exception() is None
    assert set(read_topic(broker.bootstrap, sink)) == set(sent)
    progress = q.recentProgress[-1]
    assert progress["sources"][0]["description"].startswith("appliance-kafka[")
    assert progress["sink"]["description"] == "appliance-kafka"


def test_batch_write_then_batch_read_with_ending_offsets(spark, broker, new_topic):
    topic = new_topic(2)
    rows = [(f"k{i}", f"v{i}", i % 2) for i in range(10)]
    (spark.createDataFrame(rows, "key string, value string, partition int")
     .selectExpr("key", "value", "partition",
                 "array(named_struct('key', 'src', 'value', cast('batch' as binary))) AS headers")
     .write.format("kafka").mode("append")
     .option("kafka.bootstrap.servers", broker.bootstrap).option("topic", topic).save())
    written = read_topic(broker.bootstrap, topic)
    assert sorted(r.value for r in written) == sorted(f"v{i}".encode() for i in range(10))
    assert all(r.headers == (("src", b"batch"),) for r in written)

    # partition 0 from offset 1 up to (excluding) 4; partition 1 everything
    got = (spark.read.format("kafka")
           .option("kafka.bootstrap.servers", broker.bootstrap)
           .option("subscribe", topic)
           .option("includeHeaders", "true")
           .option("startingOffsets", json.dumps({topic: {"0": 1, "1": -2}}))
           .option("endingOffsets", json.dumps({topic: {"0": 4, "1": -1}}))
           .load().collect())
    assert sorted((r["partition"], r["offset"]) for r in got) == (
        [(0, 1), (0, 2), (0, 3)] + [(1, o) for o in range(5)])
    assert {r.value for r in rows_as_recs(got)} <= {r.value for r in written}


def test_per_row_topic_column_routes_records(spark, broker, new_topic):
    a, b = new_topic(1), new_topic(1)
    (spark.createDataFrame([(a, "to-a"), (b, "to-b"), (a, "to-a-2")], "topic string, value string")
     .write.format("appliance-kafka").mode("append")
     .option("kafka.bootstrap.servers", broker.bootstrap).save())
    assert sorted(r.value for r in read_topic(broker.bootstrap, a, 1)) == [b"to-a", b"to-a-2"]
    assert [r.value for r in read_topic(broker.bootstrap, b, 1)] == [b"to-b"]
