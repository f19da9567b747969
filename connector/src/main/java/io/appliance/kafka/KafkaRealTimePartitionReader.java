package io.appliance.kafka;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.read.streaming.SupportsRealTimeRead;

/**
 * Real-time mode reader: a long-running batch hands each record downstream as soon as it is
 * fetched and asks, with a deadline, for the next one; the batch ends when the deadline passes
 * or when the driver asks for an early end ({@link BatchEnd}), which the wait for the next
 * record notices within {@link BatchEnd#POLL_MS}. Each ask for a record also says that every
 * record before it went through the plan ({@link ProgressMarks}); the wait says it again
 * every slice, so the marks keep up while no record comes.
 */
final class KafkaRealTimePartitionReader extends PartitionRecordReader
    implements SupportsRealTimeRead<InternalRow> {
  private final BatchEnd.Watch batchEnd;
  private final ProgressMarks.Tracker progress;

  KafkaRealTimePartitionReader(KafkaInputPartition split) {
    super(split);
    this.batchEnd = split.batchEnd == null ? null : split.batchEnd.watch();
    this.progress = split.progress == null ? null : split.progress.track(tp);
  }

  @Override
  public RecordStatus nextWithTimeout(Long timeoutMs) {
    long wait = timeoutMs == null ? 0 : timeoutMs;
    if (batchEnd == null && progress == null) {
      return status(fetcher.next(offset, wait));
    }
    long deadline = System.currentTimeMillis() + wait;
    while (true) {
      if (progress != null) {
        progress.processedBelow(offset);
      }
      if (batchEnd != null && batchEnd.requested()) {
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
    if (progress != null) {
      progress.close();
    }
    super.close();
  }
}
