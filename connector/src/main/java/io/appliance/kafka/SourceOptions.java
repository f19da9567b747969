package io.appliance.kafka;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Predicate;
import java.util.regex.PatternSyntaxException;

import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * The options of a read (Spark's kafka source options), parsed and validated once per scan.
 * Rules that hold for every query are checked when parsing; the rules that depend on the kind
 * of query (a stream has no end, a batch cannot start at latest) are a table checked by
 * {@link #check(ReadMode)} once the query's kind is known. The parsed object also travels to
 * executors inside each split: the readers take their client settings from it.
 */
final class SourceOptions implements Serializable {
  private static final long serialVersionUID = 1L;

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

  /** {@code maxOffsetsPerTrigger=auto}: the adaptive read limit (RateEstimator). */
  static final String AUTO = "auto";
  static final String ADAPTIVE_TARGET = "adaptiveTargetBatchDuration";
  static final String ADAPTIVE_P = "adaptiveProportionalGain";
  static final String ADAPTIVE_I = "adaptiveIntegralGain";
  static final String ADAPTIVE_D = "adaptiveDerivativeGain";
  static final String ADAPTIVE_MIN_RATE = "adaptiveMinOffsetsPerSecond";
  static final String ADAPTIVE_INITIAL_RATE = "adaptiveInitialOffsetsPerSecond";

  /** Spark's defaults for maxTriggerDelay and kafkaConsumer.pollTimeoutMs. */
  static final long DEFAULT_MAX_TRIGGER_DELAY_MS = 15 * 60 * 1000L;
  static final long DEFAULT_POLL_TIMEOUT_MS = 120_000L;
  /** Adaptive defaults: a one-second batch; the DStream guide's gains and minimum rate. */
  static final long DEFAULT_ADAPTIVE_TARGET_MS = 1000L;
  static final double DEFAULT_ADAPTIVE_P = 1.0;
  static final double DEFAULT_ADAPTIVE_I = 0.2;
  static final double DEFAULT_ADAPTIVE_D = 0.0;
  static final long DEFAULT_ADAPTIVE_MIN_RATE = 100L;
  /** The first batch's rate, before anything is measured: small, the controller ramps up fast. */
  static final long DEFAULT_ADAPTIVE_INITIAL_RATE = 1000L;

  /** Spark's kafka source options this connector does not implement: rejected, never ignored. */
  static final Map<String, String> UNSUPPORTED = table(
      "startingTimestamp", "timestamp lookups are not implemented; start from offsets",
      "endingTimestamp", "timestamp lookups are not implemented; end at offsets",
      "startingOffsetsByTimestamp", "timestamp lookups are not implemented; start from offsets",
      "endingOffsetsByTimestamp", "timestamp lookups are not implemented; end at offsets",
      "startingOffsetsByTimestampStrategy", "timestamp lookups are not implemented",
      "minPartitions", "a split is always one whole Kafka partition range",
      "maxRecordsPerPartition", "a split is always one whole Kafka partition range",
      "groupIdPrefix", "no consumer group is used (assign only)",
      "fetchOffset.numRetries", "offset lookups retry within the client's default.api.timeout.ms",
      "fetchOffset.retryIntervalMs", "offset lookups retry within the client's default.api.timeout.ms");

  /** Consumer settings the source owns (as Spark's connector does), with the reason. */
  static final Map<String, String> OWNED_CONSUMER_PROPERTIES = table(
      "auto.offset.reset", "set the source option 'startingOffsets' instead",
      "key.deserializer", "keys are always read as bytes; cast or deserialize in the query",
      "value.deserializer", "values are always read as bytes; cast or deserialize in the query",
      "enable.auto.commit", "the source tracks offsets in the checkpoint, not in Kafka",
      "interceptor.classes", "interceptors would see records out of the source's control");

  /** The options of the adaptive limit: each needs maxOffsetsPerTrigger=auto. */
  static final List<String> ADAPTIVE_OPTIONS = Arrays.asList(ADAPTIVE_TARGET, ADAPTIVE_P,
      ADAPTIVE_I, ADAPTIVE_D, ADAPTIVE_MIN_RATE, ADAPTIVE_INITIAL_RATE);

  /** The kind of query reading, and where it starts when startingOffsets is not given. */
  enum ReadMode {
    BATCH(OffsetSpec.EARLIEST), STREAM(OffsetSpec.LATEST);

    final OffsetSpec defaultStart;

    ReadMode(OffsetSpec defaultStart) {
      this.defaultStart = defaultStart;
    }
  }

  /** An option one kind of query refuses: when {@code violated}, "Option 'x' " + why. */
  private static final class ModeRule {
    final ReadMode refusedIn;
    final String option;
    final Predicate<SourceOptions> violated;
    final String why;

    ModeRule(ReadMode refusedIn, String option, Predicate<SourceOptions> violated, String why) {
      this.refusedIn = refusedIn;
      this.option = option;
      this.violated = violated;
      this.why = why;
    }
  }

  private static final List<ModeRule> MODE_RULES = List.of(
      new ModeRule(ReadMode.STREAM, ENDING_OFFSETS, o -> o.givenEnd != null,
          "is for batch queries only; a stream has no end"),
      new ModeRule(ReadMode.BATCH, STARTING_OFFSETS,
          o -> o.givenStart != null && names(o.givenStart, OffsetSpec.Kind.LATEST, OffsetJson.LATEST),
          "cannot be latest (-1) for a batch query"));

  private final Map<String, String> kafkaParams;
  private final Subscription subscription;
  private final OffsetSpec givenStart;
  private final OffsetSpec givenEnd;
  private final boolean failOnDataLoss;
  private final Long maxOffsetsPerTrigger;
  private final RateEstimator.Settings adaptive;
  private final Long minOffsetsPerTrigger;
  private final long maxTriggerDelayMs;
  private final boolean includeHeaders;
  private final long pollTimeoutMs;

  private SourceOptions(CaseInsensitiveStringMap options) {
    for (Map.Entry<String, String> e : UNSUPPORTED.entrySet()) {
      if (options.containsKey(e.getKey())) {
        throw new IllegalArgumentException("Option '" + e.getKey() + "' of Spark's kafka source "
            + "is not supported by appliance-kafka: " + e.getValue());
      }
    }
    kafkaParams = OptionParsing.kafkaParams(options, OWNED_CONSUMER_PROPERTIES);
    subscription = subscription(options);
    givenStart = options.containsKey(STARTING_OFFSETS)
        ? OffsetSpec.parse(STARTING_OFFSETS, options.get(STARTING_OFFSETS)) : null;
    givenEnd = options.containsKey(ENDING_OFFSETS)
        ? OffsetSpec.parse(ENDING_OFFSETS, options.get(ENDING_OFFSETS)) : null;
    if (givenEnd != null && names(givenEnd, OffsetSpec.Kind.EARLIEST, OffsetJson.EARLIEST)) {
      throw new IllegalArgumentException(
          "Option '" + ENDING_OFFSETS + "' cannot be earliest (-2): a batch query would read nothing");
    }
    failOnDataLoss = OptionParsing.bool(options, FAIL_ON_DATA_LOSS, true);
    boolean auto = AUTO.equalsIgnoreCase(options.getOrDefault(MAX_OFFSETS_PER_TRIGGER, "").trim());
    maxOffsetsPerTrigger = auto ? null : OptionParsing.positiveLong(options, MAX_OFFSETS_PER_TRIGGER);
    adaptive = auto ? adaptiveSettings(options) : null;
    if (!auto) {
      for (String name : ADAPTIVE_OPTIONS) {
        if (options.containsKey(name)) {
          throw new IllegalArgumentException("Option '" + name + "' applies only with '"
              + MAX_OFFSETS_PER_TRIGGER + "' set to '" + AUTO + "'");
        }
      }
    }
    minOffsetsPerTrigger = OptionParsing.positiveLong(options, MIN_OFFSETS_PER_TRIGGER);
    if (maxOffsetsPerTrigger != null && minOffsetsPerTrigger != null
        && minOffsetsPerTrigger > maxOffsetsPerTrigger) {
      throw new IllegalArgumentException("Option '" + MIN_OFFSETS_PER_TRIGGER + "' ("
          + minOffsetsPerTrigger + ") must not exceed '" + MAX_OFFSETS_PER_TRIGGER + "' ("
          + maxOffsetsPerTrigger + ")");
    }
    maxTriggerDelayMs = OptionParsing.durationMillis(options, MAX_TRIGGER_DELAY,
        DEFAULT_MAX_TRIGGER_DELAY_MS);
    includeHeaders = OptionParsing.bool(options, INCLUDE_HEADERS, false);
    pollTimeoutMs = OptionParsing.positiveLong(options, POLL_TIMEOUT, DEFAULT_POLL_TIMEOUT_MS);
  }

  /** Parses and checks everything that does not depend on the kind of query. */
  static SourceOptions parse(CaseInsensitiveStringMap options) {
    return new SourceOptions(options);
  }

  /** True when the options describe a read (so they can be validated at load()). */
  static boolean looksLikeRead(CaseInsensitiveStringMap options) {
    return options.containsKey(SUBSCRIBE) || options.containsKey(SUBSCRIBE_PATTERN)
        || options.containsKey(ASSIGN);
  }

  /** Applies the rules of {@code mode}'s kind of query; returns this. */
  SourceOptions check(ReadMode mode) {
    for (ModeRule rule : MODE_RULES) {
      if (rule.refusedIn == mode && rule.violated.test(this)) {
        throw new IllegalArgumentException("Option '" + rule.option + "' " + rule.why);
      }
    }
    return this;
  }

  private static RateEstimator.Settings adaptiveSettings(CaseInsensitiveStringMap options) {
    long target = OptionParsing.durationMillis(options, ADAPTIVE_TARGET, DEFAULT_ADAPTIVE_TARGET_MS);
    if (target <= 0) {
      throw new IllegalArgumentException("Option '" + ADAPTIVE_TARGET + "' must be positive");
    }
    return new RateEstimator.Settings(target,
        OptionParsing.nonNegativeDouble(options, ADAPTIVE_P, DEFAULT_ADAPTIVE_P),
        OptionParsing.nonNegativeDouble(options, ADAPTIVE_I, DEFAULT_ADAPTIVE_I),
        OptionParsing.nonNegativeDouble(options, ADAPTIVE_D, DEFAULT_ADAPTIVE_D),
        OptionParsing.positiveLong(options, ADAPTIVE_MIN_RATE, DEFAULT_ADAPTIVE_MIN_RATE),
        OptionParsing.positiveLong(options, ADAPTIVE_INITIAL_RATE, DEFAULT_ADAPTIVE_INITIAL_RATE));
  }

  /** Whether {@code spec} is {@code kind}, or names {@code special} (-2/-1) for a partition. */
  private static boolean names(OffsetSpec spec, OffsetSpec.Kind kind, long special) {
    return spec.kind() == kind || spec.positions().containsValue(special);
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

  /** Name/reason pairs as an ordered, unmodifiable table. */
  private static Map<String, String> table(String... pairs) {
    Map<String, String> out = new LinkedHashMap<>();
    for (int i = 0; i < pairs.length; i += 2) {
      out.put(pairs[i], pairs[i + 1]);
    }
    return Collections.unmodifiableMap(out);
  }

  /** Consumer properties: the user's kafka.* settings plus the ones the source owns. */
  Map<String, Object> consumerConfig() {
    Map<String, Object> cfg = new HashMap<>(kafkaParams);
    cfg.put("key.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
    cfg.put("value.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
    cfg.put("enable.auto.commit", "false");
    cfg.put("auto.offset.reset", "none");
    return cfg;
  }

  /** Where a query of {@code mode} starts: the given startingOffsets, else the mode's default. */
  OffsetSpec startingOffsets(ReadMode mode) {
    return givenStart != null ? givenStart : mode.defaultStart;
  }

  /** Where a batch query ends (latest unless endingOffsets says otherwise). */
  OffsetSpec endingOffsets() {
    return givenEnd != null ? givenEnd : OffsetSpec.LATEST;
  }

  Map<String, String> kafkaParams() { return kafkaParams; }
  Subscription subscription() { return subscription; }
  boolean failOnDataLoss() { return failOnDataLoss; }
  /** A fixed maxOffsetsPerTrigger, or null (none, or auto: see {@link #adaptive()}). */
  Long maxOffsetsPerTrigger() { return maxOffsetsPerTrigger; }
  /** The adaptive limit's settings with maxOffsetsPerTrigger=auto, else null. */
  RateEstimator.Settings adaptive() { return adaptive; }
  Long minOffsetsPerTrigger() { return minOffsetsPerTrigger; }
  long maxTriggerDelayMs() { return maxTriggerDelayMs; }
  boolean includeHeaders() { return includeHeaders; }
  long pollTimeoutMs() { return pollTimeoutMs; }
}
