package io.appliance.kafka;

import java.util.Map;
import java.util.Set;

import org.apache.hadoop.conf.Configuration;
import org.apache.kafka.common.TopicPartition;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.streaming.ContinuousPartitionReaderFactory;
import org.apache.spark.sql.connector.read.streaming.ContinuousStream;
import org.apache.spark.sql.connector.read.streaming.Offset;
import org.apache.spark.sql.connector.read.streaming.PartitionOffset;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The continuous-trigger source: one long-running task per partition; when the set of
 * partitions changes (new partitions, or new topics matching the pattern) Spark is told to
 * restart the tasks from the last merged offsets.
 */
final class KafkaContinuousStream implements ContinuousStream {
  private static final Logger LOG = LoggerFactory.getLogger(KafkaContinuousStream.class);
  private static final long RECHECK_MS = 500;

  private final SourceOptions options;
  private final Configuration hadoopConf;
  private final String checkpointLocation;
  private final DriverOffsetReader reader;
  private final DataLoss loss;
  private volatile Set<TopicPartition> planned;
  private long lastCheckMs;

  KafkaContinuousStream(SourceOptions options, String checkpointLocation, Configuration hadoopConf) {
    this.options = options;
    this.hadoopConf = hadoopConf;
    this.checkpointLocation = checkpointLocation;
    this.reader = new DriverOffsetReader(options);
    this.loss = new DataLoss(options.failOnDataLoss());
  }

  @Override
  public Offset initialOffset() {
    return InitialOffsetStore.getOrCreate(hadoopConf, checkpointLocation,
        () -> SplitPlanner.startingPosition(reader, options));
  }

  @Override
  public synchronized InputPartition[] planInputPartitions(Offset start) {
    Set<TopicPartition> current = reader.partitions();
    Map<TopicPartition, Long> from =
        SplitPlanner.reconcile(reader, loss, ((KafkaSourceOffset) start).offsets(), current);
    planned = current;
    return SplitPlanner.open(options, from, null, null);
  }

  @Override
  public ContinuousPartitionReaderFactory createContinuousReaderFactory() {
    return new KafkaContinuousReaderFactory();
  }

  @Override
  public Offset mergeOffsets(PartitionOffset[] offsets) {
    return KafkaSourceOffset.merge(offsets);
  }

  @Override
  public synchronized boolean needsReconfiguration() {
    long now = System.currentTimeMillis();
    if (planned == null || now - lastCheckMs < RECHECK_MS) {
      return false;
    }
    lastCheckMs = now;
    try {
      Set<TopicPartition> current = reader.partitions();
      if (!current.equals(planned)) {
        LOG.info("appliance-kafka partitions changed from {} to {}: reconfiguring", planned, current);
        return true;
      }
    } catch (RuntimeException e) {
      LOG.warn("appliance-kafka could not list partitions; will retry", e);
    }
    return false;
  }

  @Override
  public Offset deserializeOffset(String json) {
    return KafkaSourceOffset.fromJson(json);
  }

  @Override
  public void commit(Offset end) {
    // offsets live in Spark's checkpoint; nothing to commit to Kafka
  }

  @Override
  public void stop() {
    reader.close();
  }

  @Override
  public String toString() {
    return "appliance-kafka-continuous[" + options.subscription() + "]";
  }
}
