"""Every record crosses appliance-kafka -> Spark -> appliance-kafka intact, under each
trigger, and a query restarted on its checkpoint loses nothing (duplicates allowed)."""

from __future__ import annotations

import pytest

from support.connector.connector_helpers import produce, wait_for_records

pytestmark = pytest.mark.spark

TRIGGERS = {
    "microbatch": lambda w: w.trigger(processingTime="200 milliseconds"),
    "continuous": lambda w: w.trigger(continuous="1 second"),
    # real-time mode only runs in update mode; the sink appends, as Spark's kafka sink does
    "realtime": lambda w: w.trigger(realTime="5 seconds").outputMode("update"),
}


def start_relay(spark, broker, source: str, sink: str, checkpoint: str, trigger: str):
    df = (spark.readStream.format("appliance-kafka")
          .option("kafka.bootstrap.servers", broker.bootstrap)
          .option("subscribe", source)
          .option("startingOffsets", "earliest")
          .option("includeHeaders", "true")
          .load())
    writer = (df.selectExpr("key", "value", "headers").writeStream.format("appliance-kafka")
              .option("kafka.bootstrap.servers", broker.bootstrap)
              .option("topic", sink)
              .option("checkpointLocation", checkpoint))
    return TRIGGERS[trigger](writer).start()


@pytest.mark.parametrize("trigger", list(TRIGGERS))
def test_every_record_arrives_with_key_value_and_headers(spark, broker, new_topic, checkpoint,
                                                         queries, trigger):
    source, sink = new_topic(2), new_topic(2)
    before = produce(broker.bootstrap, source, "before", 40)
    q = start_relay(spark, broker, source, sink, checkpoint, trigger)
    queries.append(q)
    wait_for_records(broker.bootstrap, sink, before, query=q)
    during = produce(broker.bootstrap, source, "during", 40)
    got = wait_for_records(broker.bootstrap, sink, before + during, query=q)
    # intact means byte-identical key, value and every header, in order
    assert set(got) == set(before + during)
    q.stop()


@pytest.mark.parametrize("trigger", list(TRIGGERS))
def test_restart_on_checkpoint_resumes_without_loss(spark, broker, new_topic, checkpoint,
                                                   queries, trigger):
    source, sink = new_topic(2), new_topic(2)
    first = produce(broker.bootstrap, source, "first", 20)
    q = start_relay(spark, broker, source, sink, checkpoint, trigger)
    queries.append(q)
    wait_for_records(broker.bootstrap, sink, first, query=q)
    racing = produce(broker.bootstrap, source, "racing", 20)  # may or may not be processed
    q.stop()
    stopped = produce(broker.bootstrap, source, "stopped", 20)
    q2 = start_relay(spark, broker, source, sink, checkpoint, trigger)
    queries.append(q2)
    after = produce(broker.bootstrap, source, "after", 20)
    wait_for_records(broker.bootstrap, sink, first + racing + stopped + after, query=q2)
    q2.stop()
