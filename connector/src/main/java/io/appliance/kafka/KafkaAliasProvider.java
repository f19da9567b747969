package io.appliance.kafka;

/**
 * Registers this connector under Spark's own short name {@code kafka}, so unchanged query
 * text runs where Spark's connector is absent. When Spark's connector is present, Spark
 * resolves a duplicated short name to the provider under {@code org.apache.spark}, so its
 * own connector still wins.
 */
public final class KafkaAliasProvider extends ApplianceKafkaProvider {
  @Override
  public String shortName() {
    return "kafka";
  }
}
