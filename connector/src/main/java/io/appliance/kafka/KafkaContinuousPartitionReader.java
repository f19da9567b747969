package io.appliance.kafka;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.errors.InterruptException;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.read.streaming.ContinuousPartitionReader;

/**
 * Reads one partition forever (continuous trigger). next() blocks until a record arrives;
 * close() may come from another thread, so it wakes the consumer and waits for the poll.
 * next(), get() and getOffset() all run on Spark's one reader thread per partition.
 */
final class KafkaContinuousPartitionReader extends PartitionRecordReader
    implements ContinuousPartitionReader<InternalRow> {
  private static final long POLL_SLICE_MS = 100;

  private final Object lock = new Object();
  private volatile boolean closed;

  KafkaContinuousPartitionReader(KafkaInputPartition split) {
    super(split);
  }

  @Override
  public boolean next() {
    while (!closed && !Thread.currentThread().isInterrupted()) {
      ConsumerRecord<byte[], byte[]> r;
      synchronized (lock) {
        if (closed) {
          return false;
        }
        try {
          r = fetcher.next(offset, POLL_SLICE_MS);
        } catch (WakeupException | InterruptException e) {
          return false;
        }
      }
      if (r != null) {
        // no copy: Spark's reader thread projects and copies get() before calling next() again
        advance(r);
        return true;
      }
    }
    return false;
  }

  @Override
  public void close() {
    closed = true;
    try {
      fetcher.consumer().wakeup();
    } catch (RuntimeException ignored) {
      // already closed
    }
    synchronized (lock) {
      fetcher.markBroken(); // a pending wakeup must not leak into the next user of the consumer
      super.close();
    }
  }
}
