package io.appliance.kafka;

import org.apache.kafka.common.TopicPartition;
import org.apache.spark.sql.connector.read.streaming.PartitionOffset;

/** One partition reader's position: the next offset it would read. */
public final class KafkaPartitionOffset implements PartitionOffset {
  private static final long serialVersionUID = 1L;
  private final String topic;
  private final int partition;
  private final long offset;

  public KafkaPartitionOffset(TopicPartition tp, long offset) {
    this.topic = tp.topic();
    this.partition = tp.partition();
    this.offset = offset;
  }

  public TopicPartition topicPartition() {
    return new TopicPartition(topic, partition);
  }

  public long offset() {
    return offset;
  }

  @Override
  public String toString() {
    return topic + "-" + partition + "@" + offset;
  }
}
