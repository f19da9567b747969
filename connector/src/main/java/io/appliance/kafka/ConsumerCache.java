package io.appliance.kafka;

import java.time.Duration;
import java.util.Collections;
import java.util.Iterator;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;

/**
 * Executor-side pool of consumers, one per (settings, partition), so consecutive batches or
 * epochs of the same partition reuse a warm connection and fetch position. Consumers are
 * assigned (no group) and never shared by two tasks at once. Idle ones expire, and the pool
 * is bounded, so partitions a JVM no longer reads do not keep connections open.
 */
final class ConsumerCache {
  static final int MAX_IDLE = 64;
  static final long IDLE_EXPIRY_MS = 120_000;

  private static final Map<Key, Idle> IDLE = new ConcurrentHashMap<>();

  private ConsumerCache() {}

  static KafkaConsumer<byte[], byte[]> acquire(SourceOptions options, TopicPartition tp) {
    expire();
    Idle idle = IDLE.remove(new Key(options.kafkaParams(), tp));
    if (idle != null) {
      return idle.consumer;
    }
    KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(options.consumerConfig());
    c.assign(Collections.singleton(tp));
    return c;
  }

  /** Returns a healthy consumer for reuse; a broken one (or one over the bound) is closed. */
  static void release(SourceOptions options, TopicPartition tp, KafkaConsumer<byte[], byte[]> c,
      boolean reusable) {
    if (c == null) {
      return;
    }
    if (reusable && IDLE.size() < MAX_IDLE
        && IDLE.putIfAbsent(new Key(options.kafkaParams(), tp), new Idle(c)) == null) {
      return;
    }
    closeQuietly(c);
  }

  private static void expire() {
    long now = System.currentTimeMillis();
    for (Iterator<Map.Entry<Key, Idle>> it = IDLE.entrySet().iterator(); it.hasNext(); ) {
      Map.Entry<Key, Idle> e = it.next();
      if (now - e.getValue().since > IDLE_EXPIRY_MS && IDLE.remove(e.getKey(), e.getValue())) {
        closeQuietly(e.getValue().consumer);
      }
    }
  }

  static void closeQuietly(KafkaConsumer<byte[], byte[]> c) {
    try {
      c.close(Duration.ZERO); // assign-only: no group to leave, nothing to wait for
    } catch (RuntimeException ignored) {
      // closing is best effort: the task already has its answer
    }
  }

  private static final class Idle {
    final KafkaConsumer<byte[], byte[]> consumer;
    final long since = System.currentTimeMillis();

    Idle(KafkaConsumer<byte[], byte[]> consumer) {
      this.consumer = consumer;
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
