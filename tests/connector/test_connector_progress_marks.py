"""A real-time batch's durable progress (``ProgressMarks``): within a batch far longer than
the test, the driver learns per partition how far the records were processed and what the
task wrote for them acknowledged by Kafka; never past a record whose output Kafka has not
acknowledged (the sink's broker frozen); nothing at all for a sink that is not the
connector's (nothing says its output is durable)."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

from appliance.broker import EmbeddedBroker
from appliance.query.checkpoint import committed_offsets

from support.connector.connector_helpers import produce, wait_for_records, wait_until

pytestmark = pytest.mark.spark

#: Longer than any test here: the checkpoint commits nothing meanwhile.
BATCH = "10 minutes"
#: While the sink's broker is frozen: ample for the task to read and write 20 records.
FROZEN_S = 3.0


def durable(spark, checkpoint: str) -> dict[str, dict[str, int]]:
    return json.loads(spark.sparkContext._jvm.io.appliance.kafka.ProgressMarks.durable(
        checkpoint))


def relay(spark, source_bootstrap: str, source: str, checkpoint: str, sink: dict[str, str],
          sink_format: str = "appliance-kafka", batch: str = BATCH):
    df = (spark.readStream.format("appliance-kafka")
          .option("kafka.bootstrap.servers", source_bootstrap)
          .option("subscribe", source)
          .option("startingOffsets", "earliest")
          .option("includeHeaders", "true")
          .load())
    writer = df.selectExpr("key", "value", "headers").writeStream.format(sink_format)
    for key, value in sink.items():
        writer = writer.option(key, value)
    return (writer.option("checkpointLocation", checkpoint)
            .trigger(realTime=batch).outputMode("update").start())


@pytest.fixture
def sink_broker(tmp_path):
    """A broker of the test's own, to freeze without stopping anyone else's."""
    with EmbeddedBroker(log_path=tmp_path / "sink-broker.log") as b:
        yield b


def test_marks_follow_the_processing_within_a_batch_and_wait_for_the_acks(
        spark, broker, sink_broker, new_topic, checkpoint, queries):
    source, sink = new_topic(2), "relayed"
    sink_broker.create_topics({sink: 2})
    first = produce(broker.bootstrap, source, "first", 20)
    q = relay(spark, broker.bootstrap, source, checkpoint,
              {"kafka.bootstrap.servers": sink_broker.bootstrap, "topic": sink})
    queries.append(q)
    wait_until(lambda: durable(spark, checkpoint) == {source: {"0": 10, "1": 10}},
               "durable marks at the first 20 records", query=q)
    assert committed_offsets(checkpoint) == {}  # the batch has not ended
    assert sink_broker.proc is not None
    os.kill(sink_broker.proc.pid, signal.SIGSTOP)
    try:
        frozen = produce(broker.bootstrap, source, "frozen", 20)
        time.sleep(FROZEN_S)
        # Read and sent, not acknowledged: the marks stay where the acks are.
        assert durable(spark, checkpoint) == {source: {"0": 10, "1": 10}}
    finally:
        os.kill(sink_broker.proc.pid, signal.SIGCONT)
    wait_until(lambda: durable(spark, checkpoint) == {source: {"0": 20, "1": 20}},
               "durable marks at all 40 records once acknowledged", query=q)
    wait_for_records(sink_broker.bootstrap, sink, first + frozen, query=q)
    assert committed_offsets(checkpoint) == {}
    q.stop()
    assert durable(spark, checkpoint) == {}  # marks end with their stream


def test_no_marks_for_a_sink_that_is_not_the_connectors(spark, broker, new_topic, checkpoint,
                                                       queries):
    source = new_topic(2)
    produce(broker.bootstrap, source, "rows", 20)
    # Short batches here: the memory sink shows its rows at a batch's end, and that end
    # proves the task read them all.
    q = relay(spark, broker.bootstrap, source, checkpoint,
              {"queryName": f"marks_{os.getpid()}_{int(time.time())}"}, sink_format="memory",
              batch="5 seconds")
    queries.append(q)
    wait_until(lambda: committed_offsets(checkpoint).get(source) == {0: 10, 1: 10},
               "a batch committed past the 20 records", query=q)
    assert spark.sql(f"select count(*) from {q.name}").first()[0] == 20
    assert durable(spark, checkpoint) == {}
    q.stop()
