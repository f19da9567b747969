package io.appliance.kafka;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.regex.Pattern;

import org.apache.kafka.common.TopicPartition;

/** Which partitions the source reads: named topics, a topic pattern, or fixed partitions. */
public final class Subscription implements Serializable {
  private static final long serialVersionUID = 1L;

  public enum Kind { SUBSCRIBE, SUBSCRIBE_PATTERN, ASSIGN }

  private final Kind kind;
  private final List<String> topics;
  private final String pattern;
  private final List<TopicPartition> assigned;
  private transient Pattern compiled;

  private Subscription(Kind kind, List<String> topics, String pattern, List<TopicPartition> assigned) {
    this.kind = kind;
    this.topics = topics;
    this.pattern = pattern;
    this.assigned = assigned;
  }

  public static Subscription topics(List<String> topics) {
    return new Subscription(Kind.SUBSCRIBE, new ArrayList<>(topics), null, Collections.emptyList());
  }

  public static Subscription pattern(String regex) {
    Pattern.compile(regex); // fail fast on a bad regex (caller names the option)
    return new Subscription(Kind.SUBSCRIBE_PATTERN, Collections.emptyList(), regex, Collections.emptyList());
  }

  public static Subscription assign(List<TopicPartition> partitions) {
    return new Subscription(Kind.ASSIGN, Collections.emptyList(), null, new ArrayList<>(partitions));
  }

  public Kind kind() {
    return kind;
  }

  public List<String> topicNames() {
    return topics;
  }

  public List<TopicPartition> assigned() {
    return assigned;
  }

  public boolean matches(String topic) {
    if (compiled == null) {
      compiled = Pattern.compile(pattern);
    }
    return compiled.matcher(topic).matches();
  }

  @Override
  public String toString() {
    switch (kind) {
      case SUBSCRIBE: return "subscribe=" + String.join(",", topics);
      case SUBSCRIBE_PATTERN: return "subscribePattern=" + pattern;
      default: return "assign=" + assigned;
    }
  }
}
