package io.appliance.kafka;

import java.util.Map;
import java.util.Set;

import org.apache.kafka.common.TopicPartition;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;

/** A batch read of [startingOffsets, endingOffsets) resolved once, when the query plans. */
final class KafkaBatch implements Batch {
  private final KafkaOptions options;

  KafkaBatch(KafkaOptions options) {
    this.options = options;
  }

  @Override
  public InputPartition[] planInputPartitions() {
    try (DriverOffsetReader reader = new DriverOffsetReader(options)) {
      Set<TopicPartition> parts = reader.partitions();
      reader.requireKnown(options.startingOffsets(), parts, KafkaOptions.STARTING_OFFSETS);
      reader.requireKnown(options.endingOffsets(), parts, KafkaOptions.ENDING_OFFSETS);
      Map<TopicPartition, Long> from = reader.resolve(options.startingOffsets(), parts, OffsetSpec.EARLIEST);
      Map<TopicPartition, Long> until = reader.resolve(options.endingOffsets(), parts, OffsetSpec.LATEST);
      return SplitPlanner.bounded(reader, options, new DataLoss(options.failOnDataLoss()), from, until);
    }
  }

  @Override
  public PartitionReaderFactory createReaderFactory() {
    return new KafkaReaderFactory();
  }
}
