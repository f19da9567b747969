package io.appliance.kafka;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.header.Header;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.catalyst.util.GenericArrayData;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;

/** The read schema of Spark's kafka source, and the conversion of a record into that row. */
final class RecordRows {
  /** Field positions in the read schema (the order of Spark's kafka source). */
  static final int KEY = 0;
  static final int VALUE = 1;
  static final int TOPIC = 2;
  static final int PARTITION = 3;
  static final int OFFSET = 4;
  static final int TIMESTAMP = 5;
  static final int TIMESTAMP_TYPE = 6;
  static final int HEADERS_FIELD = 7;
  /** Field positions in one header struct (key string, value binary), read and write side. */
  static final int HEADER_KEY = 0;
  static final int HEADER_VALUE = 1;
  static final int HEADER_FIELD_COUNT = 2;
  private static final long MICROS_PER_MILLI = 1000L;

  static final StructType HEADER = new StructType(new StructField[] {
      DataTypes.createStructField("key", DataTypes.StringType, true),
      DataTypes.createStructField("value", DataTypes.BinaryType, true)});
  static final ArrayType HEADERS = DataTypes.createArrayType(HEADER, true);

  private final boolean includeHeaders;
  private final UnsafeProjection toUnsafe;
  private final GenericInternalRow scratch;
  private String topic;
  private UTF8String topicUtf8;

  RecordRows(boolean includeHeaders) {
    this.includeHeaders = includeHeaders;
    StructType schema = schema(includeHeaders);
    this.toUnsafe = UnsafeProjection.create(schema);
    this.scratch = new GenericInternalRow(schema.size());
  }

  static StructType schema(boolean includeHeaders) {
    StructType s = new StructType()
        .add("key", DataTypes.BinaryType, true)
        .add("value", DataTypes.BinaryType, true)
        .add("topic", DataTypes.StringType, true)
        .add("partition", DataTypes.IntegerType, true)
        .add("offset", DataTypes.LongType, true)
        .add("timestamp", DataTypes.TimestampType, true)
        .add("timestampType", DataTypes.IntegerType, true);
    return includeHeaders ? s.add("headers", HEADERS, true) : s;
  }

  /** The row for {@code r}; the returned row is reused by the next call (copy to keep it). */
  InternalRow toRow(ConsumerRecord<byte[], byte[]> r) {
    scratch.update(KEY, r.key());
    scratch.update(VALUE, r.value());
    scratch.update(TOPIC, topicUtf8(r.topic()));
    scratch.setInt(PARTITION, r.partition());
    scratch.setLong(OFFSET, r.offset());
    scratch.setLong(TIMESTAMP, r.timestamp() * MICROS_PER_MILLI); // Spark timestamps are micros
    scratch.setInt(TIMESTAMP_TYPE, r.timestampType().id);
    if (includeHeaders) {
      Header[] headers = r.headers().toArray();
      if (headers.length == 0) {
        scratch.setNullAt(HEADERS_FIELD);
      } else {
        Object[] items = new Object[headers.length];
        for (int i = 0; i < headers.length; i++) {
          items[i] = new GenericInternalRow(new Object[] {
              UTF8String.fromString(headers[i].key()), headers[i].value()});
        }
        scratch.update(HEADERS_FIELD, new GenericArrayData(items));
      }
    }
    return toUnsafe.apply(scratch);
  }

  /** A reader sees one topic, so its UTF-8 form is encoded once, not per record. */
  private UTF8String topicUtf8(String t) {
    if (!t.equals(topic)) {
      topic = t;
      topicUtf8 = UTF8String.fromString(t);
    }
    return topicUtf8;
  }
}
