package io.appliance.kafka;

import org.apache.kafka.common.TopicPartition;
import org.apache.spark.sql.connector.read.InputPartition;

/** One Kafka partition's slice for one task: [fromOffset, untilOffset), or open-ended. */
final class KafkaInputPartition implements InputPartition {
  private static final long serialVersionUID = 1L;
  static final long UNBOUNDED = Long.MAX_VALUE;

  final String topic;
  final int partition;
  final long fromOffset;
  final long untilOffset;
  final SourceOptions options;

  KafkaInputPartition(TopicPartition tp, long fromOffset, long untilOffset, SourceOptions options) {
    this.topic = tp.topic();
    this.partition = tp.partition();
    this.fromOffset = fromOffset;
    this.untilOffset = untilOffset;
    this.options = options;
  }

  TopicPartition topicPartition() {
    return new TopicPartition(topic, partition);
  }
}
