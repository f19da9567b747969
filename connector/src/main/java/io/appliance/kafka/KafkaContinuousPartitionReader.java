package io.appliance.kafka;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.InterruptException;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.metric.CustomTaskMetric;
import org.apache.spark.sql.connector.read.streaming.ContinuousPartitionReader;
import org.apache.spark.sql.connector.read.streaming.PartitionOffset;

/**
 * Reads one partition forever (continuous trigger). next() blocks until a record arrives;
 * close() may come from another thread, so it wakes the consumer and waits for the poll.
 */
final class KafkaContinuousPartitionReader implements ContinuousPartitionReader<InternalRow> {
  private static final long POLL_SLICE_MS = 100;

  private final TopicPartition tp;
  private final PartitionFetcher fetcher;
  private final RecordRows rows;
  private final Object lock = new Object();
  private volatile boolean closed;
  private volatile long offset;
  private InternalRow current;

  KafkaContinuousPartitionReader(KafkaInputPartition split) {
    this.tp = split.topicPartition();
    this.fetcher = new PartitionFetcher(split.options, tp);
    this.rows = new RecordRows(split.options.includeHeaders());
    this.offset = split.fromOffset;
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
        current = rows.toRow(r);
        offset = r.offset() + 1;
        return true;
      }
    }
    return false;
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
    closed = true;
    try {
      fetcher.consumer().wakeup();
    } catch (RuntimeException ignored) {
      // already closed
    }
    synchronized (lock) {
      fetcher.markBroken(); // a pending wakeup must not leak into the next user of the consumer
      fetcher.close();
    }
  }
}
