package io.appliance.kafka;

import org.apache.spark.sql.connector.metric.CustomSumMetric;
import org.apache.spark.sql.connector.metric.CustomTaskMetric;

/** Offsets readers skipped as data loss (failOnDataLoss=false), summed over tasks in the UI. */
public final class SkippedOffsetsMetric extends CustomSumMetric {
  static final String NAME = "skippedOffsets";

  @Override
  public String name() {
    return NAME;
  }

  @Override
  public String description() {
    return "offsets skipped as data loss (failOnDataLoss=false)";
  }

  static CustomTaskMetric[] taskValue(long value) {
    return new CustomTaskMetric[] {new CustomTaskMetric() {
      @Override
      public String name() {
        return NAME;
      }

      @Override
      public long value() {
        return value;
      }
    }};
  }
}
