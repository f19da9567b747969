package io.appliance.kafka;

import java.util.Collections;
import java.util.Map;
import java.util.TreeMap;

import org.apache.kafka.common.TopicPartition;
import org.apache.spark.sql.connector.read.streaming.Offset;
import org.apache.spark.sql.connector.read.streaming.PartitionOffset;

/**
 * A whole-source position: the next offset to read for every partition. Serialized as
 * Spark's Kafka source does ({"topic":{"0":42}}) so checkpoints read the same way.
 */
public final class KafkaSourceOffset extends Offset {
  private final Map<TopicPartition, Long> offsets;

  public KafkaSourceOffset(Map<TopicPartition, Long> offsets) {
    TreeMap<TopicPartition, Long> sorted = new TreeMap<>(OffsetJson.PARTITION_ORDER);
    sorted.putAll(offsets);
    this.offsets = Collections.unmodifiableMap(sorted);
  }

  public Map<TopicPartition, Long> offsets() {
    return offsets;
  }

  @Override
  public String json() {
    return OffsetJson.format(offsets);
  }

  public static KafkaSourceOffset fromJson(String json) {
    return new KafkaSourceOffset(OffsetJson.parsePositions(json, "offset log"));
  }

  /** Builds the source offset from what each partition reader reached (continuous, real-time). */
  public static KafkaSourceOffset merge(PartitionOffset[] partitionOffsets) {
    Map<TopicPartition, Long> merged = new TreeMap<>(OffsetJson.PARTITION_ORDER);
    for (PartitionOffset po : partitionOffsets) {
      if (!(po instanceof KafkaPartitionOffset)) {
        throw new IllegalArgumentException("not an appliance-kafka partition offset: " + po);
      }
      KafkaPartitionOffset k = (KafkaPartitionOffset) po;
      merged.merge(k.topicPartition(), k.offset(), Math::max);
    }
    return new KafkaSourceOffset(merged);
  }
}
