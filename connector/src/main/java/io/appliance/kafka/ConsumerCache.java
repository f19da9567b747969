package io.appliance.kafka;

import java.time.Duration;
import java.util.Collections;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;

/**
 * Executor-side pool of consumers, one per (settings, partition), so consecutive batches or
 * epochs of the same partition reuse a warm connection and fetch position. Consumers are
 * assigned (no group) and never shared by two tasks at once.
 */
final class ConsumerCache {
  private static final Map<Key, KafkaConsumer<byte[], byte[]>> IDLE = new ConcurrentHashMap<>();

  private ConsumerCache() {}

  static KafkaConsumer<byte[], byte[]> acquire(KafkaOptions options, TopicPartition tp) {
    KafkaConsumer<byte[], byte[]> c = IDLE.remove(new Key(options.kafkaParams(), tp));
    if (c != null) {
      return c;
    }
    c = new KafkaConsumer<>(options.consumerConfig());
    c.assign(Collections.singleton(tp));
    return c;
  }

  /** Returns a healthy consumer for reuse; a broken one (or a surplus one) is closed. */
  static void release(KafkaOptions options, TopicPartition tp, KafkaConsumer<byte[], byte[]> c,
      boolean reusable) {
    if (c == null) {
      return;
    }
    if (reusable && IDLE.putIfAbsent(new Key(options.kafkaParams(), tp), c) == null) {
      return;
    }
    closeQuietly(c);
  }

  static void closeQuietly(KafkaConsumer<byte[], byte[]> c) {
    try {
      c.close(Duration.ofSeconds(2));
    } catch (RuntimeException ignored) {
      // closing is best effort: the task already has its answer
    }
  }

  private static final class Key {
    private final Map<String, String> params;
    private final TopicPartition tp;

    Key(Map<String, String> params, TopicPartition tp) {
      this.params = params;
      this.tp = tp;
    }

    @Override
    public boolean equals(Object o) {
      return o instanceof Key && ((Key) o).params.equals(params) && ((Key) o).tp.equals(tp);
    }

    @Override
    public int hashCode() {
      return Objects.hash(params, tp);
    }
  }
}
