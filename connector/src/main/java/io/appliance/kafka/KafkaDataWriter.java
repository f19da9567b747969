package io.appliance.kafka;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.producer.Callback;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.spark.TaskContext;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.sql.connector.write.DataWriter;
import org.apache.spark.sql.connector.write.WriterCommitMessage;

/**
 * Sends one task's rows. commit() waits until every record THIS writer sent is acknowledged
 * and fails if any send failed, so an epoch or batch is only committed once all of its
 * records are acknowledged by the broker (at-least-once).
 *
 * <p>Why not {@code producer.flush()}: the producer is shared by every task of the JVM, so a
 * flush also waits for the other tasks' in-flight records, and in continuous mode the task
 * reads nothing while it commits: each epoch then stalled every task for a round trip of all
 * of them. Counting this writer's own unacknowledged sends gives the same guarantee (the
 * producer completes a record's callback only after its ack or its final failure, and
 * {@code delivery.timeout.ms} bounds that) and usually finds nothing left to wait for.
 * {@code -Dappliance.kafka.sink.flushOnCommit=true} restores the flush (the bench's ablation).
 *
 * <p>A real-time batch commits only at its end, so its reader asks the writer of its task how
 * far the acknowledgements got in between ({@link ProgressMarks}): the writer's sends are cut
 * into generations ({@link Sends}) at each of the reader's marks ({@link #seal}), and each
 * generation counts its own unacknowledged sends. Writers are found by task attempt
 * ({@link #ofTask}), since Spark gives the reader and the writer of a task no way to each other.
 */
final class KafkaDataWriter implements DataWriter<InternalRow> {
  private final SinkOptions options;
  private final SinkColumns cols;
  private final ProducerCache.Entry lease;
  private final KafkaProducer<byte[], byte[]> producer;
  private static final boolean FLUSH_ON_COMMIT = Boolean.getBoolean("appliance.kafka.sink.flushOnCommit");
  /** Live writers by task attempt, for their task's real-time reader ({@link #ofTask}). */
  private static final Map<Long, KafkaDataWriter> BY_TASK = new ConcurrentHashMap<>();
  private volatile Exception failure;
  /** Sends of this writer whose callback has not run yet (commit() waits for zero). */
  private final AtomicLong unacked = new AtomicLong();
  private final Object acked = new Object();
  /** The generation new sends join; replaced by {@link #seal} (task thread only). */
  private Sends current = new Sends();
  private final long taskAttempt;
  private boolean released;
  private long written;

  KafkaDataWriter(SinkOptions options, SinkColumns cols) {
    this.options = options;
    this.cols = cols;
    this.lease = ProducerCache.acquire(options);
    this.producer = lease.producer;
    TaskContext ctx = TaskContext.get();
    this.taskAttempt = ctx == null ? -1 : ctx.taskAttemptId();
    if (taskAttempt >= 0) {
      BY_TASK.put(taskAttempt, this);
    }
  }

  /** The open writer of task attempt {@code taskAttempt}, or null. */
  static KafkaDataWriter ofTask(long taskAttempt) {
    return taskAttempt < 0 ? null : BY_TASK.get(taskAttempt);
  }

  /**
   * The sends between two seals, and the callback of each of them (one object per
   * generation, not a lambda per record): acknowledged once every one was, and no send of
   * the writer failed (a failure stops every later mark too, so the writer's one suffices).
   */
  final class Sends implements Callback {
    private final AtomicLong pending = new AtomicLong();

    @Override
    public void onCompletion(RecordMetadata metadata, Exception e) {
      if (e != null && failure == null) {
        failure = e;
      }
      pending.decrementAndGet();
      if (unacked.decrementAndGet() == 0) {
        synchronized (acked) {
          acked.notifyAll();
        }
      }
    }

    boolean acknowledged() {
      return pending.get() == 0 && failure == null;
    }
  }

  /** Ends the current generation of sends (returned) and starts the next (task thread). */
  Sends seal() {
    Sends sealed = current;
    current = new Sends();
    return sealed;
  }


  @Override
  public void write(InternalRow row) throws IOException {
    checkFailure();
    String topic = cols.topicOption;
    if (topic == null && !row.isNullAt(cols.topic)) {
      topic = row.getUTF8String(cols.topic).toString();
    }
    if (topic == null) {
      throw new IllegalArgumentException(
          "A row has a null 'topic' and no option 'topic' is set: cannot choose a topic");
    }
    Integer partition = cols.partition >= 0 && !row.isNullAt(cols.partition)
        ? row.getInt(cols.partition) : null;
    byte[] key = cols.key >= 0 ? bytes(row, cols.key, cols.keyIsString) : null;
    byte[] value = bytes(row, cols.value, cols.valueIsString);
    ProducerRecord<byte[], byte[]> record =
        new ProducerRecord<>(topic, partition, key, value, headers(row));
    Sends sends = current;
    unacked.incrementAndGet();
    sends.pending.incrementAndGet();
    try {
      producer.send(record, sends);
    } catch (RuntimeException e) {
      unacked.decrementAndGet();  // never handed to the producer: no callback will come
      sends.pending.decrementAndGet();
      if (failure == null) {
        failure = e;  // no later mark may pass this record
      }
      throw e;
    }
    written++;
  }

  private static byte[] bytes(InternalRow row, int i, boolean isString) {
    if (row.isNullAt(i)) {
      return null;
    }
    return isString ? row.getUTF8String(i).getBytes() : row.getBinary(i);
  }

  /** The row's headers, or null (no headers; ProducerRecord takes null) without allocating. */
  private List<Header> headers(InternalRow row) {
    if (cols.headers < 0 || row.isNullAt(cols.headers)) {
      return null;
    }
    ArrayData items = row.getArray(cols.headers);
    List<Header> out = new ArrayList<>(items.numElements());
    for (int i = 0; i < items.numElements(); i++) {
      if (items.isNullAt(i)) {
        continue;
      }
      InternalRow h = items.getStruct(i, RecordRows.HEADER_FIELD_COUNT);
      out.add(new RecordHeader(h.getUTF8String(RecordRows.HEADER_KEY).toString(),
          h.isNullAt(RecordRows.HEADER_VALUE) ? null : h.getBinary(RecordRows.HEADER_VALUE)));
    }
    return out;
  }

  private void checkFailure() throws IOException {
    Exception e = failure;
    if (e != null) {
      ProducerCache.retire(options, lease);
      throw new IOException("appliance-kafka failed to send a record: " + e.getMessage(), e);
    }
  }

  @Override
  public WriterCommitMessage commit() throws IOException {
    if (FLUSH_ON_COMMIT) {
      producer.flush();
    } else {
      awaitAcks();
    }
    checkFailure();
    return new Committed(written);
  }

  /** Blocks until every record this writer sent has its ack (or its final failure). */
  private void awaitAcks() throws IOException {
    synchronized (acked) {
      while (unacked.get() > 0) {
        try {
          acked.wait(100);  // woken by the last callback; the timeout only re-checks
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          throw new IOException("appliance-kafka: interrupted while waiting for acks", e);
        }
      }
    }
  }

  @Override
  public void abort() {
    // sent records may already be visible: at-least-once, the retry resends the rest
  }

  @Override
  public void close() {
    if (!released) {  // the producer is shared: give back the lease, never close it here
      released = true;
      if (taskAttempt >= 0) {
        BY_TASK.remove(taskAttempt, this);
      }
      ProducerCache.release(lease);
    }
  }

  /** What a writer task reports on commit: how many records it acknowledged. */
  static final class Committed implements WriterCommitMessage {
    private static final long serialVersionUID = 1L;
    final long records;

    Committed(long records) {
      this.records = records;
    }
  }
}
