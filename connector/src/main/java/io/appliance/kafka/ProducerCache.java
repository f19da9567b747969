package io.appliance.kafka;

import java.time.Duration;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.kafka.clients.producer.KafkaProducer;

/**
 * One producer per JVM and settings, shared by all writer tasks: a producer is thread-safe
 * and its connections and batching are worth keeping across batches and epochs.
 */
final class ProducerCache {
  private static final Map<Map<String, String>, KafkaProducer<byte[], byte[]>> PRODUCERS =
      new ConcurrentHashMap<>();

  static {
    Runtime.getRuntime().addShutdownHook(new Thread(ProducerCache::closeAll, "appliance-kafka-producers"));
  }

  private ProducerCache() {}

  static KafkaProducer<byte[], byte[]> get(KafkaOptions options) {
    return PRODUCERS.computeIfAbsent(options.kafkaParams(),
        p -> new KafkaProducer<>(options.producerConfig()));
  }

  /** Drops a producer after a send failed, so the task retry starts from a fresh one. */
  static void evict(KafkaOptions options, KafkaProducer<byte[], byte[]> producer) {
    if (PRODUCERS.remove(options.kafkaParams(), producer)) {
      try {
        producer.close(Duration.ofSeconds(5));
      } catch (RuntimeException ignored) {
        // the task is failing anyway
      }
    }
  }

  private static void closeAll() {
    for (KafkaProducer<byte[], byte[]> p : PRODUCERS.values()) {
      try {
        p.close(Duration.ofSeconds(5));
      } catch (RuntimeException ignored) {
        // shutting down
      }
    }
  }
}
