"""A wrong option fails when the query is defined or started, naming the option."""

from __future__ import annotations

import pytest
from pyspark.errors import PySparkException

pytestmark = pytest.mark.spark


def read(spark, **options):
    reader = spark.readStream.format("appliance-kafka")
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


@pytest.mark.parametrize("options, named", [
    ({"subscribe": "t"}, "kafka.bootstrap.servers"),
    ({"kafka.bootstrap.servers": "127.0.0.1:1", "subscribe": "t", "assign": '{"t":[0]}'},
     "subscribe"),
    ({"kafka.bootstrap.servers": "127.0.0.1:1", "subscribe": "t",
      "startingOffsets": '{"t": {"0": 1'}, "startingOffsets"),
    ({"kafka.bootstrap.servers": "127.0.0.1:1", "subscribe": "t",
      "startingOffsets": '{"t": {"x": 1}}'}, "startingOffsets"),
    ({"kafka.bootstrap.servers": "127.0.0.1:1", "assign": '{"t": "0"}'}, "assign"),
    ({"kafka.bootstrap.servers": "127.0.0.1:1", "subscribePattern": "(["}, "subscribePattern"),
    ({"kafka.bootstrap.servers": "127.0.0.1:1", "subscribe": "t", "maxOffsetsPerTrigger": "0"},
     "maxOffsetsPerTrigger"),
    ({"kafka.bootstrap.servers": "127.0.0.1:1", "subscribe": "t",
      "kafka.auto.offset.reset": "earliest"}, "kafka.auto.offset.reset"),
    ({"kafka.bootstrap.servers": "127.0.0.1:1", "subscribe": "t",
      "startingOffsetsByTimestamp": "{}"}, "startingOffsetsByTimestamp"),
])
def test_bad_read_option_fails_at_load_naming_the_option(spark, options, named):
    with pytest.raises(PySparkException) as err:
        read(spark, **options)
    assert f"'{named}'" in str(err.value)


def test_missing_subscription_fails_at_start_naming_the_options(spark, tmp_path):
    df = read(spark, **{"kafka.bootstrap.servers": "127.0.0.1:1"})
    with pytest.raises(Exception) as err:
        q = (df.writeStream.format("memory").queryName("never")
             .option("checkpointLocation", str(tmp_path)).start())
        try:
            q.awaitTermination(60)
        finally:
            q.stop()
    assert "'subscribe', 'subscribePattern', 'assign'" in str(err.value)


def test_ending_offsets_in_a_stream_is_rejected(spark, tmp_path):
    df = read(spark, **{"kafka.bootstrap.servers": "127.0.0.1:1", "subscribe": "t",
                        "endingOffsets": "latest"})
    with pytest.raises(Exception, match="'endingOffsets'"):
        q = (df.writeStream.format("memory").queryName("never2")
             .option("checkpointLocation", str(tmp_path)).start())
        try:
            q.awaitTermination(60)
        finally:
            q.stop()


@pytest.mark.parametrize("columns, options, message", [
    (["'k' AS key"], {"topic": "t"}, "Required attribute 'value'"),
    (["'v' AS value"], {}, "option 'topic'"),
    (["1 AS value"], {"topic": "t"}, "'value' must be a string or binary"),
    (["'v' AS value", "'p' AS partition"], {"topic": "t"}, "'partition' must be an int"),
])
def test_bad_sink_input_fails_at_write_naming_the_column(spark, columns, options, message):
    writer = spark.range(1).selectExpr(*columns).write.format("appliance-kafka").mode("append")
    writer = writer.option("kafka.bootstrap.servers", "127.0.0.1:1")
    for key, value in options.items():
        writer = writer.option(key, value)
    with pytest.raises(PySparkException) as err:
        writer.save()
    assert message in str(err.value)


def test_send_failure_fails_the_write_instead_of_losing_records(spark, broker):
    """The topic does not exist (auto-creation is off): the producer cannot deliver, and the
    write must fail rather than commit."""
    writer = (spark.range(3).selectExpr("cast(id AS string) AS value")
              .write.format("appliance-kafka").mode("append")
              .option("kafka.bootstrap.servers", broker.bootstrap)
              .option("kafka.max.block.ms", "1500")
              .option("topic", "no-such-topic-for-connector-tests"))
    with pytest.raises(Exception) as err:  # noqa: B017 - Py4JJavaError or a PySparkException
        writer.save()
    assert "appliance-kafka failed to send a record" in str(err.value)
    assert "no-such-topic-for-connector-tests" in str(err.value)


def test_kafka_prefixed_options_reach_the_consumer(spark, broker, new_topic):
    """kafka.* options are handed to the Kafka client with the prefix stripped: the client's
    own validation names the property."""
    topic = new_topic(1)
    df = (spark.read.format("appliance-kafka")
          .option("kafka.bootstrap.servers", broker.bootstrap)
          .option("subscribe", topic)
          .option("kafka.request.timeout.ms", "not-a-number")
          .load())
    with pytest.raises(Exception, match="request.timeout.ms"):  # noqa: B017 - Py4JJavaError
        df.count()
