package io.appliance.kafka;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.streaming.ContinuousPartitionReader;
import org.apache.spark.sql.connector.read.streaming.ContinuousPartitionReaderFactory;

/** Continuous-trigger readers: one long-lived reader per partition. */
final class KafkaContinuousReaderFactory implements ContinuousPartitionReaderFactory {
  private static final long serialVersionUID = 1L;

  @Override
  public ContinuousPartitionReader<InternalRow> createReader(InputPartition partition) {
    return new KafkaContinuousPartitionReader((KafkaInputPartition) partition);
  }
}
