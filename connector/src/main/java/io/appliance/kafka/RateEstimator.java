package io.appliance.kafka;

import java.io.Serializable;

/**
 * The adaptive read limit of {@code maxOffsetsPerTrigger=auto}: a PID controller on the
 * admission rate (offsets per second), after the rate estimator the Spark Streaming (DStream)
 * programming guide describes for backpressure, adapted to micro-batches that have a target
 * duration instead of a fixed batch interval.
 *
 * <p>After every batch that read records it is told how many it read and how long the batch
 * took. From that it derives
 * <ul>
 * <li>the processing rate {@code p = records / duration};</li>
 * <li>the error {@code e = rate - p}: how far the rate it allowed is above what was processed;</li>
 * <li>the scheduling delay {@code s = max(0, duration - target)}: how long the batch overran
 * its target, i.e. how late the next batch starts (the DStream guide's scheduling delay), turned
 * into a rate as {@code s * p / target} (the records that piled up meanwhile, per second);</li>
 * <li>the change of the error per second since the previous batch.</li>
 * </ul>
 * The new rate is {@code rate - kp*e - ki*s*p/target - kd*de/dt}, never below the minimum
 * rate, and the next batch may read {@code rate * target} offsets. With the default gains
 * (kp=1, ki=0.2, kd=0, those of the DStream guide) the rate follows what the query actually
 * processes, minus a fifth of any overrun, so batches settle near the target duration while a
 * backlog drains at the pace the query sustains; memory per batch stays bounded however far
 * behind the query is.
 *
 * <p>Not thread-safe: the micro-batch stream calls it under its own lock.
 */
final class RateEstimator {
  /** The controller's settings (source options; see SourceOptions for names and defaults). */
  static final class Settings implements Serializable {
    private static final long serialVersionUID = 1L;

    final long targetMs;
    final double proportional;
    final double integral;
    final double derivative;
    final double minRate;
    final double initialRate;

    Settings(long targetMs, double proportional, double integral, double derivative,
        double minRate, double initialRate) {
      this.targetMs = targetMs;
      this.proportional = proportional;
      this.integral = integral;
      this.derivative = derivative;
      this.minRate = minRate;
      this.initialRate = Math.max(initialRate, minRate);
    }
  }

  private static final double MS_PER_S = 1000.0;

  private final Settings settings;
  private double rate;
  private double lastError;
  private long lastTimeMs = -1;

  RateEstimator(Settings settings) {
    this.settings = settings;
    this.rate = settings.initialRate;
  }

  /** Offsets per second the next batch may admit. */
  double rate() {
    return rate;
  }

  /** The read limit of the next batch: rate x target duration, at least one offset. */
  long offsetsPerTrigger() {
    return Math.max(1L, Math.round(rate * settings.targetMs / MS_PER_S));
  }

  /**
   * Feeds one finished batch: {@code records} read in {@code durationMs}, finished at
   * {@code timeMs}. Batches without records or without a measurable duration carry no
   * information about the query's speed and leave the rate alone. Returns the new rate.
   */
  double update(long timeMs, long records, long durationMs) {
    if (records <= 0 || durationMs <= 0) {
      return rate;
    }
    double processingRate = records * MS_PER_S / durationMs;
    double error = rate - processingRate;
    double schedulingDelayMs = Math.max(0, durationMs - settings.targetMs);
    double historicalError = schedulingDelayMs * processingRate / settings.targetMs;
    double dError = 0;
    if (lastTimeMs >= 0 && timeMs > lastTimeMs) {
      dError = (error - lastError) * MS_PER_S / (timeMs - lastTimeMs);
    }
    double next = rate - settings.proportional * error - settings.integral * historicalError
        - settings.derivative * dError;
    rate = Double.isFinite(next) ? Math.max(next, settings.minRate) : settings.minRate;
    lastError = error;
    lastTimeMs = timeMs;
    return rate;
  }
}
