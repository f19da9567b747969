package io.appliance.kafka;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.metric.CustomTaskMetric;
import org.apache.spark.sql.connector.read.PartitionReader;

/** Reads a bounded offset range of one partition (batch queries and micro-batches). */
final class KafkaRangePartitionReader implements PartitionReader<InternalRow> {
  private final KafkaInputPartition split;
  private final TopicPartition tp;
  private final PartitionFetcher fetcher;
  private final RecordRows rows;
  private long offset;
  private InternalRow current;

  KafkaRangePartitionReader(KafkaInputPartition split) {
    this.split = split;
    this.tp = split.topicPartition();
    this.fetcher = new PartitionFetcher(split.options, tp);
    this.rows = new RecordRows(split.options.includeHeaders());
    this.offset = split.fromOffset;
  }

  @Override
  public boolean next() {
    if (offset >= split.untilOffset) {
      return false;
    }
    ConsumerRecord<byte[], byte[]> r = fetcher.next(offset, split.options.pollTimeoutMs());
    if (r == null) {
      long latest = fetcher.latestOffset();
      if (latest <= offset) {
        fetcher.reportDataLoss("Expected offsets up to "
            + split.untilOffset + " of " + tp + " but the partition now ends at " + latest);
        return false;
      }
      fetcher.markBroken();
      throw new IllegalStateException("Timed out after " + split.options.pollTimeoutMs()
          + " ms reading offset " + offset + " of " + tp
          + " (raise kafkaConsumer.pollTimeoutMs if the broker is slow)");
    }
    if (r.offset() >= split.untilOffset) {
      offset = split.untilOffset;
      return false;
    }
    current = rows.toRow(r);
    offset = r.offset() + 1;
    return true;
  }

  @Override
  public InternalRow get() {
    return current;
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
