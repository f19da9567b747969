package io.appliance.kafka;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.PatternSyntaxException;

import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * Parses and validates the options of Spark's Kafka source and sink. Every error names the
 * option so a wrong query fails at start with a message the user can act on.
 */
public final class KafkaOptions implements Serializable {
  private static final long serialVersionUID = 1L;

  static final String PREFIX = "kafka.";
  static final String BOOTSTRAP = "kafka.bootstrap.servers";
  static final String SUBSCRIBE = "subscribe";
  static final String SUBSCRIBE_PATTERN = "subscribePattern";
  static final String ASSIGN = "assign";
  static final String STARTING_OFFSETS = "startingOffsets";
  static final String ENDING_OFFSETS = "endingOffsets";
  static final String FAIL_ON_DATA_LOSS = "failOnDataLoss";
  static final String MAX_OFFSETS_PER_TRIGGER = "maxOffsetsPerTrigger";
  static final String MIN_OFFSETS_PER_TRIGGER = "minOffsetsPerTrigger";
  static final String MAX_TRIGGER_DELAY = "maxTriggerDelay";
  static final String INCLUDE_HEADERS = "includeHeaders";
  static final String POLL_TIMEOUT = "kafkaConsumer.pollTimeoutMs";
  static final String TOPIC = "topic";

  /** Spark's Kafka options this connector does not implement: rejected, never ignored. */
  static final List<String> UNSUPPORTED = Arrays.asList(
      "startingTimestamp", "endingTimestamp", "startingOffsetsByTimestamp",
      "endingOffsetsByTimestamp", "startingOffsetsByTimestampStrategy", "minPartitions",
      "maxRecordsPerPartition", "groupIdPrefix", "fetchOffset.numRetries",
      "fetchOffset.retryIntervalMs");

  /** Consumer/producer settings the connector owns (as Spark's connector does). */
  private static final Map<String, String> FORBIDDEN_READ = Map.of(
      "auto.offset.reset", "set the source option 'startingOffsets' instead",
      "key.deserializer", "keys are always read as bytes; cast or deserialize in the query",
      "value.deserializer", "values are always read as bytes; cast or deserialize in the query",
      "enable.auto.commit", "the source tracks offsets in the checkpoint, not in Kafka",
      "interceptor.classes", "interceptors would see records out of the source's control");
  private static final Map<String, String> FORBIDDEN_WRITE = Map.of(
      "key.serializer", "keys are written as bytes; cast the 'key' column to string or binary",
      "value.serializer", "values are written as bytes; cast the 'value' column to string or binary");

  private final Map<String, String> kafkaParams;
  private final Subscription subscription;
  private final OffsetSpec startingOffsets;
  private final OffsetSpec endingOffsets;
  private final boolean failOnDataLoss;
  private final Long maxOffsetsPerTrigger;
  private final Long minOffsetsPerTrigger;
  private final long maxTriggerDelayMs;
  private final boolean includeHeaders;
  private final long pollTimeoutMs;
  private final String topic;

  private KafkaOptions(Map<String, String> kafkaParams, Subscription subscription,
      OffsetSpec startingOffsets, OffsetSpec endingOffsets, boolean failOnDataLoss,
      Long maxOffsetsPerTrigger, Long minOffsetsPerTrigger, long maxTriggerDelayMs,
      boolean includeHeaders, long pollTimeoutMs, String topic) {
    this.kafkaParams = kafkaParams;
    this.subscription = subscription;
    this.startingOffsets = startingOffsets;
    this.endingOffsets = endingOffsets;
    this.failOnDataLoss = failOnDataLoss;
    this.maxOffsetsPerTrigger = maxOffsetsPerTrigger;
    this.minOffsetsPerTrigger = minOffsetsPerTrigger;
    this.maxTriggerDelayMs = maxTriggerDelayMs;
    this.includeHeaders = includeHeaders;
    this.pollTimeoutMs = pollTimeoutMs;
    this.topic = topic;
  }

  /** True when the options describe a read (so they can be validated at load()). */
  public static boolean looksLikeRead(CaseInsensitiveStringMap options) {
    return options.containsKey(SUBSCRIBE) || options.containsKey(SUBSCRIBE_PATTERN)
        || options.containsKey(ASSIGN);
  }

  /**
   * Options of a read. {@code streaming}: TRUE/FALSE check the stream- or batch-only rules;
   * null (at load(), when the kind of query is not known yet) checks everything else.
   */
  public static KafkaOptions forRead(CaseInsensitiveStringMap options, Boolean streaming) {
    rejectUnsupported(options);
    Map<String, String> params = kafkaParams(options, FORBIDDEN_READ);
    Subscription subscription = subscription(options);
    OffsetSpec starting = options.containsKey(STARTING_OFFSETS)
        ? OffsetSpec.parse(STARTING_OFFSETS, options.get(STARTING_OFFSETS))
        : (Boolean.FALSE.equals(streaming) ? OffsetSpec.EARLIEST : OffsetSpec.LATEST);
    OffsetSpec ending = OffsetSpec.LATEST;
    if (options.containsKey(ENDING_OFFSETS)) {
      if (Boolean.TRUE.equals(streaming)) {
        throw new IllegalArgumentException(
            "Option '" + ENDING_OFFSETS + "' is for batch queries only; a stream has no end");
      }
      ending = OffsetSpec.parse(ENDING_OFFSETS, options.get(ENDING_OFFSETS));
      if (ending.kind() == OffsetSpec.Kind.EARLIEST
          || ending.positions().containsValue(OffsetJson.EARLIEST)) {
        throw new IllegalArgumentException(
            "Option '" + ENDING_OFFSETS + "' cannot be earliest (-2): a batch query would read nothing");
      }
    }
    if (Boolean.FALSE.equals(streaming) && (starting.kind() == OffsetSpec.Kind.LATEST
        || starting.positions().containsValue(OffsetJson.LATEST))) {
      throw new IllegalArgumentException(
          "Option '" + STARTING_OFFSETS + "' cannot be latest (-1) for a batch query");
    }
    Long maxPerTrigger = positiveLong(options, MAX_OFFSETS_PER_TRIGGER);
    Long minPerTrigger = positiveLong(options, MIN_OFFSETS_PER_TRIGGER);
    if (maxPerTrigger != null && minPerTrigger != null && minPerTrigger > maxPerTrigger) {
      throw new IllegalArgumentException("Option '" + MIN_OFFSETS_PER_TRIGGER + "' ("
          + minPerTrigger + ") must not exceed '" + MAX_OFFSETS_PER_TRIGGER + "' (" + maxPerTrigger + ")");
    }
    long maxDelayMs = options.containsKey(MAX_TRIGGER_DELAY)
        ? Durations.parseMillis(MAX_TRIGGER_DELAY, options.get(MAX_TRIGGER_DELAY))
        : 15 * 60 * 1000L;
    Long poll = positiveLong(options, POLL_TIMEOUT);
    return new KafkaOptions(params, subscription, starting, ending,
        bool(options, FAIL_ON_DATA_LOSS, true), maxPerTrigger, minPerTrigger, maxDelayMs,
        bool(options, INCLUDE_HEADERS, false), poll == null ? 120_000L : poll, null);
  }

  /** Options of a write (batch or streaming). */
  public static KafkaOptions forWrite(CaseInsensitiveStringMap options) {
    Map<String, String> params = kafkaParams(options, FORBIDDEN_WRITE);
    String topic = options.get(TOPIC);
    if (topic != null && topic.trim().isEmpty()) {
      throw new IllegalArgumentException("Option '" + TOPIC + "' must not be empty");
    }
    return new KafkaOptions(params, null, null, null, true, null, null, 0L, false, 0L,
        topic == null ? null : topic.trim());
  }

  private static void rejectUnsupported(CaseInsensitiveStringMap options) {
    for (String name : UNSUPPORTED) {
      if (options.containsKey(name)) {
        throw new IllegalArgumentException("Option '" + name
            + "' of Spark's kafka source is not supported by appliance-kafka (see docs/connector.md)");
      }
    }
  }

  private static Map<String, String> kafkaParams(CaseInsensitiveStringMap options,
      Map<String, String> forbidden) {
    Map<String, String> params = new TreeMap<>();
    for (Map.Entry<String, String> e : options.asCaseSensitiveMap().entrySet()) {
      String key = e.getKey();
      if (key.toLowerCase(Locale.ROOT).startsWith(PREFIX)) {
        String name = key.substring(PREFIX.length());
        String why = forbidden.get(name);
        if (why != null) {
          throw new IllegalArgumentException("Option '" + key + "' is not supported: " + why);
        }
        params.put(name, e.getValue());
      }
    }
    String servers = params.get("bootstrap.servers");
    if (servers == null || servers.trim().isEmpty()) {
      throw new IllegalArgumentException(
          "Option '" + BOOTSTRAP + "' must be specified (host:port[,host:port...])");
    }
    return Collections.unmodifiableMap(params);
  }

  private static Subscription subscription(CaseInsensitiveStringMap options) {
    List<String> given = new ArrayList<>();
    for (String name : Arrays.asList(SUBSCRIBE, SUBSCRIBE_PATTERN, ASSIGN)) {
      if (options.containsKey(name)) {
        given.add(name);
      }
    }
    if (given.size() != 1) {
      throw new IllegalArgumentException("Exactly one of the options 'subscribe', "
          + "'subscribePattern', 'assign' must be specified; got "
          + (given.isEmpty() ? "none" : given.toString()));
    }
    String name = given.get(0);
    String value = options.get(name).trim();
    switch (name) {
      case SUBSCRIBE: {
        List<String> topics = new ArrayList<>();
        for (String t : value.split(",")) {
          if (!t.trim().isEmpty()) {
            topics.add(t.trim());
          }
        }
        if (topics.isEmpty()) {
          throw new IllegalArgumentException("Option 'subscribe' names no topic");
        }
        return Subscription.topics(topics);
      }
      case SUBSCRIBE_PATTERN:
        if (value.isEmpty()) {
          throw new IllegalArgumentException("Option 'subscribePattern' is empty");
        }
        try {
          return Subscription.pattern(value);
        } catch (PatternSyntaxException e) {
          throw new IllegalArgumentException(
              "Option 'subscribePattern' is not a valid regex: " + e.getDescription());
        }
      default:
        return Subscription.assign(OffsetJson.parseAssignment(value, ASSIGN));
    }
  }

  private static Long positiveLong(CaseInsensitiveStringMap options, String name) {
    if (!options.containsKey(name)) {
      return null;
    }
    String raw = options.get(name).trim();
    long v;
    try {
      v = Long.parseLong(raw);
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException("Option '" + name + "' must be a positive integer, got '" + raw + "'");
    }
    if (v <= 0) {
      throw new IllegalArgumentException("Option '" + name + "' must be a positive integer, got " + v);
    }
    return v;
  }

  private static boolean bool(CaseInsensitiveStringMap options, String name, boolean dflt) {
    if (!options.containsKey(name)) {
      return dflt;
    }
    String raw = options.get(name).trim();
    if (raw.equalsIgnoreCase("true")) {
      return true;
    }
    if (raw.equalsIgnoreCase("false")) {
      return false;
    }
    throw new IllegalArgumentException("Option '" + name + "' must be true or false, got '" + raw + "'");
  }

  /** Consumer properties: the user's kafka.* settings plus the ones the source owns. */
  public Map<String, Object> consumerConfig() {
    Map<String, Object> cfg = new HashMap<>(kafkaParams);
    cfg.put("key.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
    cfg.put("value.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
    cfg.put("enable.auto.commit", "false");
    cfg.put("auto.offset.reset", "none");
    return cfg;
  }

  /** Producer properties: the user's kafka.* settings plus byte serializers. */
  public Map<String, Object> producerConfig() {
    Map<String, Object> cfg = new HashMap<>(kafkaParams);
    cfg.put("key.serializer", "org.apache.kafka.common.serialization.ByteArraySerializer");
    cfg.put("value.serializer", "org.apache.kafka.common.serialization.ByteArraySerializer");
    return cfg;
  }

  public Map<String, String> kafkaParams() { return kafkaParams; }
  public Subscription subscription() { return subscription; }
  public OffsetSpec startingOffsets() { return startingOffsets; }
  public OffsetSpec endingOffsets() { return endingOffsets; }
  public boolean failOnDataLoss() { return failOnDataLoss; }
  public Long maxOffsetsPerTrigger() { return maxOffsetsPerTrigger; }
  public Long minOffsetsPerTrigger() { return minOffsetsPerTrigger; }
  public long maxTriggerDelayMs() { return maxTriggerDelayMs; }
  public boolean includeHeaders() { return includeHeaders; }
  public long pollTimeoutMs() { return pollTimeoutMs; }
  public String topic() { return topic; }
}
