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
  /** Real-time splits: where their batch learns that it should end early (else null). */
  final BatchEnd.Ref batchEnd;
  /** Real-time splits: where their reader's durable progress goes (else null). */
  final ProgressMarks.Ref progress;

  KafkaInputPartition(TopicPartition tp, long fromOffset, long untilOffset, SourceOptions options) {
    this(tp, fromOffset, untilOffset, options, null, null);
  }

  KafkaInputPartition(TopicPartition tp, long fromOffset, long untilOffset, SourceOptions options,
      BatchEnd.Ref batchEnd, ProgressMarks.Ref progress) {
    this.topic = tp.topic();
    this.partition = tp.partition();
    this.fromOffset = fromOffset;
    this.untilOffset = untilOffset;
    this.options = options;
    this.batchEnd = batchEnd;
    this.progress = progress;
  }

  TopicPartition topicPartition() {
    return new TopicPartition(topic, partition);
  }
}
