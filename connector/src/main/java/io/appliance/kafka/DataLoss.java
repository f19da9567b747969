package io.appliance.kafka;

import java.util.concurrent.atomic.AtomicLong;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * failOnDataLoss in one place: offsets that vanished (retention, deleted or recreated topic)
 * either fail the query with the reason, or are skipped with a warning and counted.
 */
final class DataLoss {
  private static final Logger LOG = LoggerFactory.getLogger(DataLoss.class);
  /** Data-loss events skipped in this JVM (driver and executors of local mode). */
  static final AtomicLong SKIPPED_EVENTS = new AtomicLong();

  private DataLoss() {}

  static void report(boolean failOnDataLoss, String message) {
    if (failOnDataLoss) {
      throw new IllegalStateException(message
          + ". Some data may have been lost. If this is expected, set the source option "
          + "failOnDataLoss=false to skip it with a warning.");
    }
    SKIPPED_EVENTS.incrementAndGet();
    LOG.warn("appliance-kafka data loss skipped (failOnDataLoss=false): {}", message);
  }
}
