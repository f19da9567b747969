package io.appliance.kafka;

import java.io.Serializable;
import java.util.HashMap;
import java.util.Map;

import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * The options of a write (Spark's kafka sink options): only what the sink needs, the
 * producer's {@code kafka.*} properties and the default topic. Shipped to executors with the
 * writer factory.
 */
final class SinkOptions implements Serializable {
  private static final long serialVersionUID = 1L;

  static final String TOPIC = "topic";

  /** Producer settings the sink owns, with the reason. */
  static final Map<String, String> OWNED_PRODUCER_PROPERTIES = Map.of(
      "key.serializer", "keys are written as bytes; cast the 'key' column to string or binary",
      "value.serializer", "values are written as bytes; cast the 'value' column to string or binary");

  private final Map<String, String> kafkaParams;
  private final String topic;

  private SinkOptions(CaseInsensitiveStringMap options) {
    kafkaParams = OptionParsing.kafkaParams(options, OWNED_PRODUCER_PROPERTIES);
    String given = options.get(TOPIC);
    if (given != null && given.trim().isEmpty()) {
      throw new IllegalArgumentException("Option '" + TOPIC + "' must not be empty");
    }
    topic = given == null ? null : given.trim();
  }

  static SinkOptions parse(CaseInsensitiveStringMap options) {
    return new SinkOptions(options);
  }

  /** Producer properties: the user's kafka.* settings plus byte serializers. */
  Map<String, Object> producerConfig() {
    Map<String, Object> cfg = new HashMap<>(kafkaParams);
    cfg.put("key.serializer", "org.apache.kafka.common.serialization.ByteArraySerializer");
    cfg.put("value.serializer", "org.apache.kafka.common.serialization.ByteArraySerializer");
    return cfg;
  }

  /** The user's kafka.* settings: the key of the shared producer (ProducerCache). */
  Map<String, String> kafkaParams() { return kafkaParams; }

  /** The option 'topic' (every row's topic, overriding a 'topic' column), or null. */
  String topic() { return topic; }
}
