package io.appliance.kafka;

import java.util.concurrent.atomic.AtomicLong;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * failOnDataLoss in one place: offsets that vanished (retention, deleted or recreated topic)
 * either fail the query with the reason, or are skipped with a warning and counted. One
 * instance per stream (driver) or per reader (executor), so counts belong to one query.
 */
final class DataLoss {
  private static final Logger LOG = LoggerFactory.getLogger(DataLoss.class);

  private final boolean failOnDataLoss;
  private final AtomicLong skippedEvents = new AtomicLong();

  DataLoss(boolean failOnDataLoss) {
    this.failOnDataLoss = failOnDataLoss;
  }

  void report(String message) {
    if (failOnDataLoss) {
      throw new IllegalStateException(message
          + ". Some data may have been lost. If this is expected, set the source option "
          + "failOnDataLoss=false to skip it with a warning.");
    }
    skippedEvents.incrementAndGet();
    LOG.warn("appliance-kafka data loss skipped (failOnDataLoss=false): {}", message);
  }

  long skippedEvents() {
    return skippedEvents.get();
  }
}
