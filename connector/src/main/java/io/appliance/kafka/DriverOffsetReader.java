package io.appliance.kafka;

import java.io.InterruptedIOException;
import java.io.UncheckedIOException;
import java.time.Duration;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.function.Supplier;

import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.InterruptException;

/**
 * The driver's view of the topics: which partitions exist and their earliest/latest offsets.
 * One consumer, never subscribed (metadata and list-offsets requests only).
 */
final class DriverOffsetReader implements AutoCloseable {
  private final SourceOptions options;
  private KafkaConsumer<byte[], byte[]> consumer;

  DriverOffsetReader(SourceOptions options) {
    this.options = options;
  }

  private KafkaConsumer<byte[], byte[]> consumer() {
    if (consumer == null) {
      consumer = new KafkaConsumer<>(options.consumerConfig());
    }
    return consumer;
  }

  /**
   * The partitions the subscription currently covers. Always asks the broker (listTopics):
   * the consumer's cached metadata would hide partitions added while a query runs.
   */
  synchronized Set<TopicPartition> partitions() {
    Set<TopicPartition> out = new TreeSet<>(OffsetJson.PARTITION_ORDER);
    Subscription s = options.subscription();
    if (s.kind() == Subscription.Kind.ASSIGN) {
      out.addAll(s.assigned());
      return out;
    }
    Map<String, List<PartitionInfo>> topics =
        call(() -> consumer().listTopics(Duration.ofMillis(options.pollTimeoutMs())));
    for (Map.Entry<String, List<PartitionInfo>> e : topics.entrySet()) {
      boolean wanted = s.kind() == Subscription.Kind.SUBSCRIBE
          ? s.topicNames().contains(e.getKey()) : s.matches(e.getKey());
      if (wanted) {
        addAll(out, e.getValue());
      }
    }
    return out;
  }

  private static void addAll(Set<TopicPartition> out, List<PartitionInfo> infos) {
    if (infos != null) {
      for (PartitionInfo p : infos) {
        out.add(new TopicPartition(p.topic(), p.partition()));
      }
    }
  }

  synchronized Map<TopicPartition, Long> earliest(Collection<TopicPartition> partitions) {
    if (partitions.isEmpty()) {
      return new HashMap<>();
    }
    return sorted(call(() -> consumer().beginningOffsets(partitions,
        Duration.ofMillis(options.pollTimeoutMs()))));
  }

  synchronized Map<TopicPartition, Long> latest(Collection<TopicPartition> partitions) {
    if (partitions.isEmpty()) {
      return new HashMap<>();
    }
    return sorted(call(() -> consumer().endOffsets(partitions,
        Duration.ofMillis(options.pollTimeoutMs()))));
  }

  /**
   * Runs a client call; a stop interrupts the query thread, and Kafka reports that as its own
   * InterruptException, which Spark would take for a failure. Rethrown as an interrupted I/O
   * error, Spark recognises the clean stop.
   */
  private <T> T call(Supplier<T> op) {
    try {
      return op.get();
    } catch (InterruptException e) {
      Thread.currentThread().interrupt();
      InterruptedIOException io = new InterruptedIOException("appliance-kafka offset lookup interrupted");
      io.initCause(e);
      throw new UncheckedIOException(io);
    }
  }

  private static Map<TopicPartition, Long> sorted(Map<TopicPartition, Long> m) {
    Map<TopicPartition, Long> out = new TreeMap<>(OffsetJson.PARTITION_ORDER);
    out.putAll(m);
    return out;
  }

  /**
   * Turns a starting spec into concrete offsets for {@code partitions}; explicit -2/-1 become
   * earliest/latest, partitions the spec omits start at {@code fallback}.
   */
  Map<TopicPartition, Long> resolve(OffsetSpec spec, Set<TopicPartition> partitions, OffsetSpec fallback) {
    Map<TopicPartition, Long> earliest = earliest(partitions);
    Map<TopicPartition, Long> latest = latest(partitions);
    Map<TopicPartition, Long> out = new TreeMap<>(OffsetJson.PARTITION_ORDER);
    for (TopicPartition tp : partitions) {
      long wanted;
      if (spec.kind() == OffsetSpec.Kind.EARLIEST) {
        wanted = OffsetJson.EARLIEST;
      } else if (spec.kind() == OffsetSpec.Kind.LATEST) {
        wanted = OffsetJson.LATEST;
      } else if (spec.positions().containsKey(tp)) {
        wanted = spec.positions().get(tp);
      } else {
        wanted = fallback.kind() == OffsetSpec.Kind.LATEST ? OffsetJson.LATEST : OffsetJson.EARLIEST;
      }
      if (wanted == OffsetJson.EARLIEST) {
        out.put(tp, earliest.get(tp));
      } else if (wanted == OffsetJson.LATEST) {
        out.put(tp, latest.get(tp));
      } else {
        out.put(tp, wanted);
      }
    }
    return out;
  }

  /** Partitions named in an explicit spec that do not exist: a user error, named clearly. */
  void requireKnown(OffsetSpec spec, Set<TopicPartition> partitions, String option) {
    for (TopicPartition tp : spec.positions().keySet()) {
      if (!partitions.contains(tp)) {
        throw new IllegalArgumentException("Option '" + option + "' names " + tp
            + " which is not among the subscribed partitions " + partitions);
      }
    }
  }

  @Override
  public synchronized void close() {
    if (consumer != null) {
      consumer.close(Duration.ofSeconds(5));
      consumer = null;
    }
  }
}
