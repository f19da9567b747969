package io.appliance.kafka;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.metric.CustomTaskMetric;
import org.apache.spark.sql.connector.read.streaming.PartitionOffset;
import org.apache.spark.sql.connector.read.streaming.SupportsRealTimeRead;

/**
 * Real-time mode reader: a long-running batch hands each record downstream as soon as it is
 * fetched and asks, with a deadline, for the next one; the batch ends when the deadline passes.
 */
final class KafkaRealTimePartitionReader implements SupportsRealTimeRead<InternalRow> {
  private final TopicPartition tp;
  private final KafkaInputPartition split;
  private final PartitionFetcher fetcher;
  private final RecordRows rows;
  private long offset;
  private InternalRow current;

  KafkaRealTimePartitionReader(KafkaInputPartition split) {
    this.split = split;
    this.tp = split.topicPartition();
    this.fetcher = new PartitionFetcher(split.options, tp);
    this.rows = new RecordRows(split.options.includeHeaders());
    this.offset = split.fromOffset;
  }

  @Override
  public RecordStatus nextWithTimeout(Long timeoutMs) {
    ConsumerRecord<byte[], byte[]> r = fetcher.next(offset, timeoutMs == null ? 0 : timeoutMs);
    if (r == null) {
      return RecordStatus.newStatusWithoutArrivalTime(false);
    }
    current = rows.toRow(r);
    offset = r.offset() + 1;
    return RecordStatus.newStatusWithArrivalTimeMs(r.timestamp());
  }

  @Override
  public RecordStatus nextWithTimeout(Long startTimeMs, Long timeoutMs) {
    return nextWithTimeout(timeoutMs);
  }

  @Override
  public boolean next() {
    return nextWithTimeout(split.options.pollTimeoutMs()).hasRecord();
  }

  @Override
  public InternalRow get() {
    return current;
  }

  @Override
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
