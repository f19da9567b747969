package io.appliance.kafka;

import java.util.Map;
import java.util.Set;

import org.apache.kafka.common.TopicPartition;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;

/** A batch read of [startingOffsets, endingOffsets) resolved once, when the query plans. */
final class KafkaBatch implements Batch {
  private final SourceOptions options;

  KafkaBatch(SourceOptions options) {
    this.options = options;
  }

  @Override
  public InputPartition[] planInputPartitions() {
    try (DriverOffsetReader reader = new DriverOffsetReader(options)) {
      Set<TopicPartition> parts = reader.partitions();
      OffsetSpec starting = options.startingOffsets(SourceOptions.ReadMode.BATCH);
      reader.requireKnown(starting, parts, SourceOptions.STARTING_OFFSETS);
      reader.requireKnown(options.endingOffsets(), parts, SourceOptions.ENDING_OFFSETS);
      Map<TopicPartition, Long> from = reader.resolve(starting, parts, OffsetSpec.EARLIEST);
      Map<TopicPartition, Long> until = reader.resolve(options.endingOffsets(), parts, OffsetSpec.LATEST);
      return SplitPlanner.bounded(reader, options, new DataLoss(options.failOnDataLoss()), from, until);
    }
  }

  @Override
  public PartitionReaderFactory createReaderFactory() {
    return new KafkaReaderFactory();
  }
}
