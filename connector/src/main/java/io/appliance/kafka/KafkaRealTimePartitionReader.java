package io.appliance.kafka;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.read.streaming.SupportsRealTimeRead;

/**
 * Real-time mode reader: a long-running batch hands each record downstream as soon as it is
 * fetched and asks, with a deadline, for the next one; the batch ends when the deadline passes.
 */
final class KafkaRealTimePartitionReader extends PartitionRecordReader
    implements SupportsRealTimeRead<InternalRow> {
  KafkaRealTimePartitionReader(KafkaInputPartition split) {
    super(split);
  }

  @Override
  public RecordStatus nextWithTimeout(Long timeoutMs) {
    ConsumerRecord<byte[], byte[]> r = fetcher.next(offset, timeoutMs == null ? 0 : timeoutMs);
    if (r == null) {
      return RecordStatus.newStatusWithoutArrivalTime(false);
    }
    advance(r);
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
}
