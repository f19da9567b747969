package io.appliance.kafka;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;

import org.apache.kafka.clients.producer.Callback;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.sql.connector.write.DataWriter;
import org.apache.spark.sql.connector.write.WriterCommitMessage;

/**
 * Sends one task's rows. commit() flushes and fails if any send failed, so an epoch or batch
 * is only committed once every record is acknowledged by the broker (at-least-once).
 */
final class KafkaDataWriter implements DataWriter<InternalRow> {
  private final SinkOptions options;
  private final SinkColumns cols;
  private final ProducerCache.Entry lease;
  private final KafkaProducer<byte[], byte[]> producer;
  private volatile Exception failure;
  /** One callback for every send (not a new lambda per record): keeps the first failure. */
  private final Callback onAck = (metadata, e) -> {
    if (e != null && failure == null) {
      failure = e;
    }
  };
  private boolean released;
  private long written;

  KafkaDataWriter(SinkOptions options, SinkColumns cols) {
    this.options = options;
    this.cols = cols;
    this.lease = ProducerCache.acquire(options);
    this.producer = lease.producer;
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
    producer.send(record, onAck);
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
    producer.flush();
    checkFailure();
    return new Committed(written);
  }

  @Override
  public void abort() {
    // sent records may already be visible: at-least-once, the retry resends the rest
  }

  @Override
  public void close() {
    if (!released) {  // the producer is shared: give back the lease, never close it here
      released = true;
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
