package io.appliance.kafka;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.write.BatchWrite;
import org.apache.spark.sql.connector.write.DataWriter;
import org.apache.spark.sql.connector.write.DataWriterFactory;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.PhysicalWriteInfo;
import org.apache.spark.sql.connector.write.Write;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.connector.write.WriterCommitMessage;
import org.apache.spark.sql.connector.write.streaming.StreamingDataWriterFactory;
import org.apache.spark.sql.connector.write.streaming.StreamingWrite;
import org.apache.spark.sql.internal.connector.SupportsStreamingUpdateAsAppend;

/**
 * The sink: a write is validated (options, columns, the producer cache's Spark settings)
 * when the query starts; batch and streaming writes share one writer factory. Kafka has no
 * transactions here, so the driver-side commit has nothing to do: durability comes from
 * each task's flush. Update output mode (which real-time mode requires) appends, as
 * Spark's kafka sink does: Kafka has no keys to update in place.
 */
final class KafkaWrite implements WriteBuilder, SupportsStreamingUpdateAsAppend, Write, BatchWrite,
    StreamingWrite {
  private final WriterFactory factory;

  KafkaWrite(LogicalWriteInfo info) {
    SinkOptions options = SinkOptions.parse(info.options());
    ProducerCache.EvictorSettings.current();  // a bad cache setting fails here, not per task
    this.factory = new WriterFactory(options, SinkColumns.resolve(info.schema(), options.topic()));
  }

  @Override
  public Write build() {
    return this;
  }

  @Override
  public String description() {
    return "appliance-kafka";
  }

  @Override
  public BatchWrite toBatch() {
    return this;
  }

  @Override
  public StreamingWrite toStreaming() {
    return this;
  }

  @Override
  public DataWriterFactory createBatchWriterFactory(PhysicalWriteInfo info) {
    return factory;
  }

  @Override
  public StreamingDataWriterFactory createStreamingWriterFactory(PhysicalWriteInfo info) {
    return factory;
  }

  @Override
  public boolean useCommitCoordinator() {
    return false;
  }

  @Override
  public void commit(WriterCommitMessage[] messages) {}

  @Override
  public void abort(WriterCommitMessage[] messages) {}

  @Override
  public void commit(long epochId, WriterCommitMessage[] messages) {}

  @Override
  public void abort(long epochId, WriterCommitMessage[] messages) {}

  /** Ships options and column positions to executors. */
  static final class WriterFactory implements DataWriterFactory, StreamingDataWriterFactory {
    private static final long serialVersionUID = 1L;
    private final SinkOptions options;
    private final SinkColumns cols;

    WriterFactory(SinkOptions options, SinkColumns cols) {
      this.options = options;
      this.cols = cols;
    }

    @Override
    public DataWriter<InternalRow> createWriter(int partitionId, long taskId) {
      return new KafkaDataWriter(options, cols);
    }

    @Override
    public DataWriter<InternalRow> createWriter(int partitionId, long taskId, long epochId) {
      return new KafkaDataWriter(options, cols);
    }
  }
}
