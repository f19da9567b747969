package io.appliance.kafka;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkEnv;

/**
 * One producer per JVM and settings, shared by all writer tasks: a producer is thread-safe
 * and its connections and batching are worth keeping across batches and epochs.
 *
 * <p>Writers lease a producer and release it when they close. A producer that saw a send
 * failure is retired: new leases get a fresh one, but the retired producer is closed only
 * once its last lease is released, so one task's failure never breaks the in-flight sends
 * of another task sharing it.
 *
 * <p>A producer nobody has leased for {@code spark.kafka.producer.cache.timeout} (Spark's
 * key and default, 10m) is closed by an evictor that runs every
 * {@code spark.kafka.producer.cache.evictorThreadRunInterval} (1m): without it, the
 * producer of a stopped query kept its connections, and its reconnect warnings once that
 * broker went away, until the JVM exited. A running query's micro-batches and epochs lease
 * far more often than that, so its producer stays warm.
 */
final class ProducerCache {
  /** Spark's keys for the same policy of its own Kafka sink, with its defaults. */
  static final String TIMEOUT_KEY = "spark.kafka.producer.cache.timeout";
  static final String TIMEOUT_DEFAULT = "10m";
  static final String EVICTOR_INTERVAL_KEY = "spark.kafka.producer.cache.evictorThreadRunInterval";
  static final String EVICTOR_INTERVAL_DEFAULT = "1m";

  private static final Map<Map<String, String>, Entry> CURRENT = new HashMap<>();
  private static ScheduledExecutorService evictor;

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
    /** System.nanoTime() when the last lease was released (meaningful while leases == 0). */
    private long idleSince;

    private Entry(KafkaProducer<byte[], byte[]> producer) {
      this.producer = producer;
    }
  }

  static synchronized Entry acquire(SinkOptions options) {
    startEvictor();
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
      if (entry.leases == 0) {
        entry.idleSince = System.nanoTime();
      }
    }
    if (close) {
      closeQuietly(entry.producer);
    }
  }

  /**
   * Closes and forgets every producer without a lease for longer than {@code timeoutMs} as
   * of {@code nowNanos} (System.nanoTime()); returns how many. The evictor's step, and the
   * Java checks' handle on it with a clock of their own.
   */
  static int evictIdle(long nowNanos, long timeoutMs) {
    List<Entry> idle = new ArrayList<>();
    synchronized (ProducerCache.class) {
      for (Iterator<Entry> it = CURRENT.values().iterator(); it.hasNext(); ) {
        Entry entry = it.next();
        if (entry.leases == 0
            && TimeUnit.NANOSECONDS.toMillis(nowNanos - entry.idleSince) > timeoutMs) {
          it.remove();
          idle.add(entry);
        }
      }
    }
    for (Entry entry : idle) {  // outside the lock: closing may wait for the network thread
      closeQuietly(entry.producer);
    }
    return idle.size();
  }

  /**
   * The evictor's two Spark settings, parsed and checked. The sink checks them when a write
   * is planned (KafkaWrite, on the driver), so a bad value fails the query at its start
   * with the key named, instead of failing every writer task's first lease.
   */
  record EvictorSettings(long timeoutMs, long intervalMs) {
    static EvictorSettings of(SparkConf conf) {
      return new EvictorSettings(positiveMillis(conf, TIMEOUT_KEY, TIMEOUT_DEFAULT),
          positiveMillis(conf, EVICTOR_INTERVAL_KEY, EVICTOR_INTERVAL_DEFAULT));
    }

    /** This JVM's Spark settings (Spark's defaults outside Spark). */
    static EvictorSettings current() {
      SparkEnv env = SparkEnv.get();
      return of(env == null ? new SparkConf(false) : env.conf());
    }
  }

  /** Starts the evictor with the JVM's Spark settings; once. */
  private static void startEvictor() {
    if (evictor != null) {
      return;
    }
    EvictorSettings settings = EvictorSettings.current();
    evictor = Executors.newSingleThreadScheduledExecutor(task -> {
      Thread t = new Thread(task, "appliance-kafka-producer-evictor");
      t.setDaemon(true);
      return t;
    });
    evictor.scheduleWithFixedDelay(() -> evictIdle(System.nanoTime(), settings.timeoutMs()),
        settings.intervalMs(), settings.intervalMs(), TimeUnit.MILLISECONDS);
  }

  /** A Spark setting in the connector's duration format (Durations), which must be positive. */
  private static long positiveMillis(SparkConf conf, String key, String fallback) {
    String raw = conf.get(key, fallback);
    long ms = Durations.parseMillis(key, raw);
    if (ms <= 0) {
      throw new IllegalArgumentException("Option '" + key + "' must be positive, got '" + raw + "'");
    }
    return ms;
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
