package io.appliance.kafka;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.metric.CustomTaskMetric;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.streaming.PartitionOffset;

/**
 * What the range, continuous and real-time readers share: one partition's fetcher, the row
 * conversion, the next offset to read and the current row. Subclasses decide when to stop.
 */
abstract class PartitionRecordReader implements PartitionReader<InternalRow> {
  final KafkaInputPartition split;
  final TopicPartition tp;
  final PartitionFetcher fetcher;
  private final RecordRows rows;
  long offset;
  private InternalRow current;

  PartitionRecordReader(KafkaInputPartition split) {
    this.split = split;
    this.tp = split.topicPartition();
    this.fetcher = new PartitionFetcher(split.options, tp);
    this.rows = new RecordRows(split.options.includeHeaders());
    this.offset = split.fromOffset;
  }

  /** Makes {@code r} the current row (reused by the next call) and moves past it. */
  final void advance(ConsumerRecord<byte[], byte[]> r) {
    current = rows.toRow(r);
    offset = r.offset() + 1;
  }

  @Override
  public InternalRow get() {
    return current;
  }

  /** The next offset to read (continuous and real-time readers report it to Spark). */
  public PartitionOffset getOffset() {
    return new KafkaPartitionOffset(tp, offset);
  }

  @Override
  public CustomTaskMetric[] currentMetricsValues() {
    return SkippedOffsetsMetric.taskValue(fetcher.skippedRecords());
  }

  @Override
  public void close() {
    fetcher.close();
  }
}
