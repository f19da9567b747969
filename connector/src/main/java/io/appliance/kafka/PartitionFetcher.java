package io.appliance.kafka;

import java.time.Duration;
import java.util.Collections;
import java.util.Iterator;
import java.util.List;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetOutOfRangeException;
import org.apache.kafka.common.TopicPartition;

/**
 * Reads one partition record by record from a cached consumer, seeking only when the caller
 * asks for an offset other than the next one, and deciding what a gap in offsets means
 * (compaction and transaction markers are fine; records gone below the log start are data loss).
 */
final class PartitionFetcher implements AutoCloseable {
  private static final long MAX_POLL_SLICE_MS = 100;

  private final SourceOptions options;
  private final DataLoss loss;
  private final TopicPartition tp;
  private KafkaConsumer<byte[], byte[]> consumer;
  private Iterator<ConsumerRecord<byte[], byte[]>> buffered = Collections.emptyIterator();
  private long nextExpected = -1;
  private boolean healthy = true;
  private long skippedRecords;

  PartitionFetcher(SourceOptions options, TopicPartition tp) {
    this.options = options;
    this.loss = new DataLoss(options.failOnDataLoss());
    this.tp = tp;
    this.consumer = ConsumerCache.acquire(options, tp);
  }

  KafkaConsumer<byte[], byte[]> consumer() {
    return consumer;
  }

  long skippedRecords() {
    return skippedRecords;
  }

  /**
   * The first record at or after {@code offset}, or null if none arrived within
   * {@code timeoutMs}. Offsets lost before {@code offset} are reported via failOnDataLoss.
   */
  ConsumerRecord<byte[], byte[]> next(long offset, long timeoutMs) {
    if (offset != nextExpected) {
      consumer.seek(tp, offset);
      buffered = Collections.emptyIterator();
      nextExpected = offset;
    }
    long deadline = System.currentTimeMillis() + Math.max(0, timeoutMs);
    while (true) {
      while (buffered.hasNext()) {
        ConsumerRecord<byte[], byte[]> r = buffered.next();
        if (r.offset() < offset) {
          continue;
        }
        if (r.offset() > offset) {
          checkGap(offset, r.offset());
        }
        nextExpected = r.offset() + 1;
        return r;
      }
      long remaining = deadline - System.currentTimeMillis();
      if (remaining <= 0) {
        return null;
      }
      try {
        List<ConsumerRecord<byte[], byte[]>> records =
            consumer.poll(Duration.ofMillis(Math.min(remaining, MAX_POLL_SLICE_MS))).records(tp);
        buffered = records.iterator();
      } catch (OffsetOutOfRangeException e) {
        offset = outOfRange(offset);
        nextExpected = offset;
      } catch (RuntimeException e) {
        healthy = false;
        throw e;
      }
    }
  }

  /** A jump from {@code wanted} to {@code got}: data loss only if the log start moved past it. */
  private void checkGap(long wanted, long got) {
    long earliest = consumer.beginningOffsets(Collections.singleton(tp)).get(tp);
    if (earliest > wanted) {
      long lost = Math.min(earliest, got) - wanted;
      skippedRecords += lost;
      loss.report("Cannot fetch offset " + wanted + " of " + tp
          + ": the earliest available offset is " + earliest + " (" + lost
          + " records removed, e.g. by retention)");
    }
  }

  /** The consumer's position is outside the log; report and move to the earliest offset. */
  private long outOfRange(long offset) {
    long earliest = consumer.beginningOffsets(Collections.singleton(tp)).get(tp);
    long latest = consumer.endOffsets(Collections.singleton(tp)).get(tp);
    if (offset < earliest) {
      skippedRecords += earliest - offset;
      loss.report("Offset " + offset + " of " + tp + " is out of range: the earliest available offset is " + earliest);
    } else {
      loss.report("Offset " + offset + " of " + tp + " is beyond the latest offset " + latest + " (was the topic deleted and recreated?)");
    }
    consumer.seek(tp, earliest);
    buffered = Collections.emptyIterator();
    return earliest;
  }

  /** Latest offset of the partition (log end), for readers deciding whether to keep waiting. */
  long latestOffset() {
    return consumer.endOffsets(Collections.singleton(tp)).get(tp);
  }

  /** Data loss the reader itself noticed (counted with the fetcher's own). */
  void reportDataLoss(String message) {
    loss.report(message);
  }

  void markBroken() {
    healthy = false;
  }

  @Override
  public void close() {
    if (consumer != null) {
      ConsumerCache.release(options, tp, consumer, healthy);
      consumer = null;
    }
  }
}
