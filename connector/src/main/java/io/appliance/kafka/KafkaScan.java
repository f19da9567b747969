package io.appliance.kafka;

import org.apache.spark.sql.connector.metric.CustomMetric;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.streaming.ContinuousStream;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/** The read side of the table: validates options for the kind of query and builds it. */
final class KafkaScan implements Scan, ScanBuilder {
  private final CaseInsensitiveStringMap options;
  private final StructType schema;

  KafkaScan(CaseInsensitiveStringMap options) {
    this.options = options;
    this.schema = RecordRows.schema(KafkaOptions.forRead(options, null).includeHeaders());
  }

  @Override
  public Scan build() {
    return this;
  }

  @Override
  public StructType readSchema() {
    return schema;
  }

  @Override
  public String description() {
    return "appliance-kafka";
  }

  @Override
  public Batch toBatch() {
    return new KafkaBatch(KafkaOptions.forRead(options, false));
  }

  @Override
  public MicroBatchStream toMicroBatchStream(String checkpointLocation) {
    return new KafkaMicroBatchStream(KafkaOptions.forRead(options, true), checkpointLocation);
  }

  @Override
  public ContinuousStream toContinuousStream(String checkpointLocation) {
    return new KafkaContinuousStream(KafkaOptions.forRead(options, true), checkpointLocation);
  }

  @Override
  public CustomMetric[] supportedCustomMetrics() {
    return new CustomMetric[] {new SkippedOffsetsMetric()};
  }
}
