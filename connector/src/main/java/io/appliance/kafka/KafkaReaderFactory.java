package io.appliance.kafka;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;

/** Batch, micro-batch and real-time readers: bounded splits read a range, open ones run live. */
final class KafkaReaderFactory implements PartitionReaderFactory {
  private static final long serialVersionUID = 1L;

  @Override
  public PartitionReader<InternalRow> createReader(InputPartition partition) {
    KafkaInputPartition split = (KafkaInputPartition) partition;
    if (split.untilOffset == KafkaInputPartition.UNBOUNDED) {
      return new KafkaRealTimePartitionReader(split);
    }
    return new KafkaRangePartitionReader(split);
  }
}
