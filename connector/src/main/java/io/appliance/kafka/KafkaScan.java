package io.appliance.kafka;

import org.apache.hadoop.conf.Configuration;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.connector.metric.CustomMetric;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.streaming.ContinuousStream;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * The read side of the table: parses the options once, then checks the rules of the kind of
 * query Spark asks for (batch or stream) and builds it.
 */
final class KafkaScan implements Scan, ScanBuilder {
  private final SourceOptions options;
  private final StructType schema;

  KafkaScan(CaseInsensitiveStringMap options) {
    this.options = SourceOptions.parse(options);
    this.schema = RecordRows.schema(this.options.includeHeaders());
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
    return new KafkaBatch(options.check(SourceOptions.ReadMode.BATCH));
  }

  @Override
  public MicroBatchStream toMicroBatchStream(String checkpointLocation) {
    return new KafkaMicroBatchStream(options.check(SourceOptions.ReadMode.STREAM),
        checkpointLocation, sessionHadoopConf(), System::currentTimeMillis);
  }

  @Override
  public ContinuousStream toContinuousStream(String checkpointLocation) {
    return new KafkaContinuousStream(options.check(SourceOptions.ReadMode.STREAM),
        checkpointLocation, sessionHadoopConf());
  }

  /** The Hadoop configuration Spark's own checkpoint logs use (spark.hadoop.* included). */
  private static Configuration sessionHadoopConf() {
    return SparkSession.active().sessionState().newHadoopConf();
  }

  @Override
  public CustomMetric[] supportedCustomMetrics() {
    return new CustomMetric[] {new SkippedOffsetsMetric()};
  }
}
