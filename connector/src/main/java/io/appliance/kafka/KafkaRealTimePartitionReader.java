package io.appliance.kafka;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.read.streaming.SupportsRealTimeRead;

/**
 * Real-time mode reader: a long-running batch hands each record downstream as soon as it is
 * fetched and asks, with a deadline, for the next one; the batch ends when the deadline passes
 * or when the driver asks for an early end ({@link BatchEnd}), which the wait for the next
 * record notices within {@link BatchEnd#POLL_MS}.
 */
final class KafkaRealTimePartitionReader extends PartitionRecordReader
    implements SupportsRealTimeRead<InternalRow> {
  private final BatchEnd.Watch batchEnd;

  KafkaRealTimePartitionReader(KafkaInputPartition split) {
    super(split);
    this.batchEnd = split.batchEnd == null ? null : split.batchEnd.watch();
  }

  @Override
  public RecordStatus nextWithTimeout(Long timeoutMs) {
    long wait = timeoutMs == null ? 0 : timeoutMs;
    if (batchEnd == null) {
      return status(fetcher.next(offset, wait));
    }
    long deadline = System.currentTimeMillis() + wait;
    while (true) {
      if (batchEnd.requested()) {
        return RecordStatus.newStatusWithoutArrivalTime(false);
      }
      long remaining = deadline - System.currentTimeMillis();
      ConsumerRecord<byte[], byte[]> r =
          fetcher.next(offset, Math.max(0, Math.min(remaining, BatchEnd.POLL_MS)));
      if (r != null || remaining <= BatchEnd.POLL_MS) {
        return status(r);
      }
    }
  }

  private RecordStatus status(ConsumerRecord<byte[], byte[]> r) {
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

  @Override
  public void close() {
    if (batchEnd != null) {
      batchEnd.close();
    }
    super.close();
  }
}
