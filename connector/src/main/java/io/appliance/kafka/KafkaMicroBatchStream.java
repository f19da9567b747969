package io.appliance.kafka;

import java.util.HashMap;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.function.LongSupplier;

import org.apache.hadoop.conf.Configuration;
import org.apache.kafka.common.TopicPartition;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.streaming.CompositeReadLimit;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.connector.read.streaming.Offset;
import org.apache.spark.sql.connector.read.streaming.PartitionOffset;
import org.apache.spark.sql.connector.read.streaming.ReadLimit;
import org.apache.spark.sql.connector.read.streaming.ReadMaxRows;
import org.apache.spark.sql.connector.read.streaming.ReadMinRows;
import org.apache.spark.sql.connector.read.streaming.ReportsSourceMetrics;
import org.apache.spark.sql.connector.read.streaming.SupportsRealTimeMode;
import org.apache.spark.sql.connector.read.streaming.SupportsTriggerAvailableNow;

/**
 * The micro-batch source (also the source of real-time mode, which Spark runs as long
 * micro-batches): admission control by offsets (fixed maxOffsetsPerTrigger, or the adaptive
 * limit of maxOffsetsPerTrigger=auto), Trigger.AvailableNow, lag metrics.
 *
 * <p>Time comes from an injected clock (milliseconds), so the waiting of minOffsetsPerTrigger
 * up to maxTriggerDelay and the adaptive limit's measurements can be tested without sleeping.
 *
 * <p>The adaptive limit learns how long each batch took: a batch starts when latestOffset
 * admits it and ends when Spark asks for the source's metrics as it reports the batch's
 * progress (after the batch's commit), or at the latest when the next latestOffset call comes.
 */
final class KafkaMicroBatchStream implements MicroBatchStream, SupportsTriggerAvailableNow,
    ReportsSourceMetrics, SupportsRealTimeMode {
  private final SourceOptions options;
  private final String checkpointLocation;
  private final Configuration hadoopConf;
  private final LongSupplier clock;
  private final DriverOffsetReader reader;
  private final DataLoss loss;
  /** The adaptive limit (maxOffsetsPerTrigger=auto), else null. */
  private final RateEstimator estimator;
  private volatile Map<TopicPartition, Long> lastLatest;
  private Map<TopicPartition, Long> availableNowLimit;
  private long lastAdmitMs;
  /** The batch admitted last and not yet known to be finished (adaptive limit only). */
  private long runningSinceMs = -1;
  private long runningRecords;
  /** Real-time mode: this stream's batch-end endpoint, registered with its first batch. */
  private BatchEnd.Endpoint batchEnd;
  private ProgressMarks.Endpoint progress;

  KafkaMicroBatchStream(SourceOptions options, String checkpointLocation,
      Configuration hadoopConf, LongSupplier clock) {
    this.options = options;
    this.checkpointLocation = checkpointLocation;
    this.hadoopConf = hadoopConf;
    this.clock = clock;
    this.reader = new DriverOffsetReader(options);
    this.loss = new DataLoss(options.failOnDataLoss());
    this.estimator = options.adaptive() == null ? null : new RateEstimator(options.adaptive());
    this.lastAdmitMs = clock.getAsLong();
  }

  @Override
  public Offset initialOffset() {
    return InitialOffsetStore.getOrCreate(hadoopConf, checkpointLocation,
        () -> SplitPlanner.startingPosition(reader, options));
  }

  @Override
  public Offset latestOffset() {
    throw new UnsupportedOperationException(
        "appliance-kafka supports admission control: call latestOffset(start, limit)");
  }

  @Override
  public ReadLimit getDefaultReadLimit() {
    // auto: no fixed cap for Spark to pass back; admit() applies the adaptive one
    Long max = options.maxOffsetsPerTrigger();
    Long min = options.minOffsetsPerTrigger();
    if (min != null && max != null) {
      return ReadLimit.compositeLimit(new ReadLimit[] {
          ReadLimit.minRows(min, options.maxTriggerDelayMs()), ReadLimit.maxRows(max)});
    }
    if (min != null) {
      return ReadLimit.minRows(min, options.maxTriggerDelayMs());
    }
    if (max != null) {
      return ReadLimit.maxRows(max);
    }
    return ReadLimit.allAvailable();
  }

  @Override
  public synchronized Offset latestOffset(Offset start, ReadLimit limit) {
    batchFinished();
    Set<TopicPartition> current = reader.partitions();
    Map<TopicPartition, Long> latest = reader.latest(current);
    Map<TopicPartition, Long> from = SplitPlanner.reconcile(reader, loss,
        ((KafkaSourceOffset) start).offsets(), current, latest);
    lastLatest = latest;
    Map<TopicPartition, Long> until = new TreeMap<>(OffsetJson.PARTITION_ORDER);
    for (Map.Entry<TopicPartition, Long> e : latest.entrySet()) {
      long u = e.getValue();
      if (availableNowLimit != null) {
        Long cap = availableNowLimit.get(e.getKey());
        u = cap == null ? from.get(e.getKey()) : Math.min(u, cap);
      }
      until.put(e.getKey(), Math.max(u, from.get(e.getKey())));
    }
    return new KafkaSourceOffset(admit(from, until, limit));
  }

  /** Applies maxOffsetsPerTrigger (fixed or auto) / minOffsetsPerTrigger + maxTriggerDelay. */
  private Map<TopicPartition, Long> admit(Map<TopicPartition, Long> from,
      Map<TopicPartition, Long> until, ReadLimit limit) {
    ReadLimit[] limits = limit instanceof CompositeReadLimit
        ? ((CompositeReadLimit) limit).getReadLimits() : new ReadLimit[] {limit};
    Long max = null;
    ReadMinRows min = null;
    for (ReadLimit l : limits) {
      if (l instanceof ReadMaxRows) {
        max = ((ReadMaxRows) l).maxRows();
      } else if (l instanceof ReadMinRows) {
        min = (ReadMinRows) l;
      }
    }
    long total = 0;
    for (Map.Entry<TopicPartition, Long> e : until.entrySet()) {
      total += e.getValue() - from.get(e.getKey());
    }
    long now = clock.getAsLong();
    if (min != null && availableNowLimit == null && total < min.minRows()
        && now - lastAdmitMs < min.maxTriggerDelayMs()) {
      return from;
    }
    if (estimator != null) {
      long cap = estimator.offsetsPerTrigger();
      max = max == null ? cap : Math.min(max, cap);
    }
    Map<TopicPartition, Long> end = (max != null && total > max) ? prorate(from, until, total, max) : until;
    if (!end.equals(from)) {
      lastAdmitMs = now;
      runningSinceMs = now;
      runningRecords = Math.min(total, max == null ? total : max);
    }
    return end;
  }

  /** Tells the adaptive limit how long the batch admitted last took, once it has ended. */
  private synchronized void batchFinished() {
    if (estimator != null && runningSinceMs >= 0) {
      long now = clock.getAsLong();
      estimator.update(now, runningRecords, now - runningSinceMs);
      runningSinceMs = -1;
    }
  }

  /** Shares {@code max} offsets among partitions in proportion to their backlog, summing to max. */
  private static Map<TopicPartition, Long> prorate(Map<TopicPartition, Long> from,
      Map<TopicPartition, Long> until, long total, long max) {
    Map<TopicPartition, Long> end = new TreeMap<>(OffsetJson.PARTITION_ORDER);
    long given = 0;
    for (Map.Entry<TopicPartition, Long> e : until.entrySet()) {
      long lag = e.getValue() - from.get(e.getKey());
      long share = (long) Math.floor((double) max * lag / total);
      end.put(e.getKey(), from.get(e.getKey()) + share);
      given += share;
    }
    for (Map.Entry<TopicPartition, Long> e : end.entrySet()) {
      if (given >= max) {
        break;
      }
      long room = until.get(e.getKey()) - e.getValue();
      long extra = Math.min(room, max - given);
      e.setValue(e.getValue() + extra);
      given += extra;
    }
    return end;
  }

  @Override
  public InputPartition[] planInputPartitions(Offset start, Offset end) {
    return SplitPlanner.bounded(reader, options, loss, ((KafkaSourceOffset) start).offsets(),
        ((KafkaSourceOffset) end).offsets());
  }

  @Override
  public PartitionReaderFactory createReaderFactory() {
    return new KafkaReaderFactory();
  }

  @Override
  public synchronized void prepareForTriggerAvailableNow() {
    availableNowLimit = reader.latest(reader.partitions());
  }

  /**
   * Real-time mode: one open-ended split per partition, ended by Spark's batch deadline or,
   * earlier, on request ({@link BatchEnd}); its readers report their durable progress in
   * between ({@link ProgressMarks}).
   */
  @Override
  public synchronized InputPartition[] planInputPartitions(Offset start) {
    Map<TopicPartition, Long> from = SplitPlanner.reconcile(reader, loss,
        ((KafkaSourceOffset) start).offsets(), reader.partitions());
    if (batchEnd == null) {
      batchEnd = BatchEnd.Endpoint.open(checkpointLocation);
      progress = ProgressMarks.Endpoint.open(checkpointLocation);
    }
    return SplitPlanner.open(options, from, batchEnd == null ? null : batchEnd.ref(),
        progress == null ? null : progress.ref());
  }

  @Override
  public Offset mergeOffsets(PartitionOffset[] offsets) {
    return KafkaSourceOffset.merge(offsets);
  }

  @Override
  public Map<String, String> metrics(Optional<Offset> latestConsumed) {
    batchFinished(); // Spark reports progress once the batch is committed: it has ended
    Map<String, String> m = new HashMap<>();
    m.put("dataLossEventsSkipped", Long.toString(loss.skippedEvents()));
    if (estimator != null) {
      synchronized (this) {
        m.put("adaptiveOffsetsPerSecond", Long.toString(Math.round(estimator.rate())));
        m.put("adaptiveOffsetsPerTrigger", Long.toString(estimator.offsetsPerTrigger()));
      }
    }
    Map<TopicPartition, Long> latest = lastLatest;
    if (latest == null || !latestConsumed.isPresent()) {
      return m;
    }
    Map<TopicPartition, Long> consumed = ((KafkaSourceOffset) latestConsumed.get()).offsets();
    long min = Long.MAX_VALUE;
    long max = 0;
    long sum = 0;
    int n = 0;
    for (Map.Entry<TopicPartition, Long> e : consumed.entrySet()) {
      Long l = latest.get(e.getKey());
      if (l == null) {
        continue;
      }
      long behind = Math.max(0, l - e.getValue());
      min = Math.min(min, behind);
      max = Math.max(max, behind);
      sum += behind;
      n++;
    }
    if (n > 0) {
      m.put("minOffsetsBehindLatest", Long.toString(min));
      m.put("maxOffsetsBehindLatest", Long.toString(max));
      m.put("avgOffsetsBehindLatest", Double.toString((double) sum / n));
    }
    return m;
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
  public synchronized void stop() {
    if (batchEnd != null) {
      batchEnd.close();
      batchEnd = null;
    }
    if (progress != null) {
      progress.close();
      progress = null;
    }
    reader.close();
  }

  @Override
  public String toString() {
    return "appliance-kafka[" + options.subscription() + "]";
  }
}
