package io.appliance.kafka;

import java.util.EnumSet;
import java.util.Set;

import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.SupportsWrite;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/** Kafka as a Spark table: readable in batch, micro-batch, continuous and real-time; writable. */
final class KafkaTable implements SupportsRead, SupportsWrite {
  private final StructType schema;

  KafkaTable(StructType schema) {
    this.schema = schema;
  }

  @Override
  public String name() {
    return "appliance-kafka";
  }

  @Override
  public StructType schema() {
    return schema;
  }

  @Override
  public Set<TableCapability> capabilities() {
    // ACCEPT_ANY_SCHEMA: the sink takes any frame with the columns it knows (value, key...)
    return EnumSet.of(TableCapability.BATCH_READ, TableCapability.MICRO_BATCH_READ,
        TableCapability.CONTINUOUS_READ, TableCapability.BATCH_WRITE,
        TableCapability.STREAMING_WRITE, TableCapability.ACCEPT_ANY_SCHEMA);
  }

  @Override
  public String toString() {
    return "appliance-kafka";
  }

  @Override
  public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
    return new KafkaScan(options);
  }

  @Override
  public WriteBuilder newWriteBuilder(LogicalWriteInfo info) {
    return new KafkaWrite(info);
  }
}
