package io.appliance.kafka;

import java.time.Duration;
import java.util.HashMap;
import java.util.Map;

import org.apache.kafka.clients.producer.KafkaProducer;

/**
 * One producer per JVM and settings, shared by all writer tasks: a producer is thread-safe
 * and its connections and batching are worth keeping across batches and epochs.
 *
 * <p>Writers lease a producer and release it when they close. A producer that saw a send
 * failure is retired: new leases get a fresh one, but the retired producer is closed only
 * once its last lease is released, so one task's failure never breaks the in-flight sends
 * of another task sharing it.
 */
final class ProducerCache {
  private static final Map<Map<String, String>, Entry> CURRENT = new HashMap<>();

  static {
    Runtime.getRuntime().addShutdownHook(
        new Thread(ProducerCache::closeAll, "appliance-kafka-producers"));
  }

  private ProducerCache() {}

  /** A shared producer plus the number of writers using it. */
  static final class Entry {
    final KafkaProducer<byte[], byte[]> producer;
    private int leases;
    private boolean retired;

    private Entry(KafkaProducer<byte[], byte[]> producer) {
      this.producer = producer;
    }
  }

  static synchronized Entry acquire(SinkOptions options) {
    Entry entry = CURRENT.computeIfAbsent(options.kafkaParams(),
        p -> new Entry(new KafkaProducer<>(options.producerConfig())));
    entry.leases++;
    return entry;
  }

  /** After a send failed: later writers get a fresh producer; this one closes when unused. */
  static synchronized void retire(SinkOptions options, Entry entry) {
    if (CURRENT.remove(options.kafkaParams(), entry)) {
      entry.retired = true;
    }
  }

  static void release(Entry entry) {
    boolean close;
    synchronized (ProducerCache.class) {
      entry.leases--;
      close = entry.retired && entry.leases == 0;
    }
    if (close) {
      closeQuietly(entry.producer);
    }
  }

  private static void closeQuietly(KafkaProducer<byte[], byte[]> producer) {
    try {
      producer.close(Duration.ofSeconds(5));
    } catch (RuntimeException ignored) {
      // a failing or shutting-down producer: nothing left to deliver through it
    }
  }

  private static void closeAll() {
    synchronized (ProducerCache.class) {
      for (Entry entry : CURRENT.values()) {
        closeQuietly(entry.producer);
      }
      CURRENT.clear();
    }
  }
}
