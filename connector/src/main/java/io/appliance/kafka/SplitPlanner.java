package io.appliance.kafka;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;

import org.apache.kafka.common.TopicPartition;
import org.apache.spark.sql.connector.read.InputPartition;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Turns source positions into per-partition splits, and reconciles positions with the
 * partitions that exist now: new partitions start at earliest, deleted ones and offsets that
 * went backwards (topic recreated) are data loss.
 */
final class SplitPlanner {
  private static final Logger LOG = LoggerFactory.getLogger(SplitPlanner.class);

  private SplitPlanner() {}

  /** Positions for every current partition, starting from {@code start}. */
  static Map<TopicPartition, Long> reconcile(DriverOffsetReader reader, DataLoss loss,
      Map<TopicPartition, Long> start, Set<TopicPartition> current) {
    return reconcile(reader, loss, start, current, reader.latest(current));
  }

  /** As above, with the latest offsets of {@code current} already fetched. */
  static Map<TopicPartition, Long> reconcile(DriverOffsetReader reader, DataLoss loss,
      Map<TopicPartition, Long> start, Set<TopicPartition> current,
      Map<TopicPartition, Long> latest) {
    Map<TopicPartition, Long> out = new TreeMap<>(OffsetJson.PARTITION_ORDER);
    Set<TopicPartition> added = new HashSet<>();
    for (TopicPartition tp : current) {
      if (start.containsKey(tp)) {
        out.put(tp, start.get(tp));
      } else {
        added.add(tp);
      }
    }
    if (!added.isEmpty()) {
      LOG.info("appliance-kafka new partitions {} start at their earliest offsets", added);
      out.putAll(reader.earliest(added));
    }
    Set<TopicPartition> removed = new HashSet<>(start.keySet());
    removed.removeAll(current);
    if (!removed.isEmpty()) {
      loss.report("Partitions " + removed + " were deleted");
    }
    List<TopicPartition> wentBack = new ArrayList<>();
    for (Map.Entry<TopicPartition, Long> e : out.entrySet()) {
      if (latest.get(e.getKey()) < e.getValue()) {
        wentBack.add(e.getKey());
      }
    }
    if (!wentBack.isEmpty()) {
      Map<TopicPartition, Long> earliest = reader.earliest(wentBack);
      for (TopicPartition tp : wentBack) {
        loss.report("Offset of " + tp + " went back from " + out.get(tp) + " to " + latest.get(tp) + " (was the topic deleted and recreated?)");
        out.put(tp, earliest.get(tp));
      }
    }
    return out;
  }

  /** Splits [from, until) for every partition in {@code until} that has records to read. */
  static InputPartition[] bounded(DriverOffsetReader reader, SourceOptions options, DataLoss loss,
      Map<TopicPartition, Long> from, Map<TopicPartition, Long> until) {
    List<TopicPartition> unknown = new ArrayList<>();
    for (TopicPartition tp : until.keySet()) {
      if (!from.containsKey(tp)) {
        unknown.add(tp);
      }
    }
    Map<TopicPartition, Long> earliest = reader.earliest(unknown);
    List<InputPartition> splits = new ArrayList<>();
    for (Map.Entry<TopicPartition, Long> e : until.entrySet()) {
      TopicPartition tp = e.getKey();
      long f = from.containsKey(tp) ? from.get(tp) : earliest.get(tp);
      long u = e.getValue();
      if (u < f) {
        loss.report("Offset of " + tp + " went back from " + f + " to " + u + " (was the topic deleted and recreated?)");
        f = reader.earliest(List.of(tp)).get(tp);
      }
      if (u > f) {
        splits.add(new KafkaInputPartition(tp, f, u, options));
      }
    }
    return splits.toArray(new InputPartition[0]);
  }

  /**
   * Open-ended splits (continuous and real-time) starting at {@code from}; {@code batchEnd}:
   * how a real-time batch is ended early (null: only by its deadline); {@code progress}: where
   * its readers report their durable progress (null: nowhere).
   */
  static InputPartition[] open(SourceOptions options, Map<TopicPartition, Long> from,
      BatchEnd.Ref batchEnd, ProgressMarks.Ref progress) {
    List<InputPartition> splits = new ArrayList<>();
    for (Map.Entry<TopicPartition, Long> e : from.entrySet()) {
      splits.add(new KafkaInputPartition(e.getKey(), e.getValue(), KafkaInputPartition.UNBOUNDED,
          options, batchEnd, progress));
    }
    return splits.toArray(new InputPartition[0]);
  }

  /** The resolved starting position of a new streaming query. */
  static KafkaSourceOffset startingPosition(DriverOffsetReader reader, SourceOptions options) {
    Set<TopicPartition> parts = reader.partitions();
    OffsetSpec starting = options.startingOffsets(SourceOptions.ReadMode.STREAM);
    reader.requireKnown(starting, parts, SourceOptions.STARTING_OFFSETS);
    return new KafkaSourceOffset(reader.resolve(starting, parts, OffsetSpec.LATEST));
  }
}
