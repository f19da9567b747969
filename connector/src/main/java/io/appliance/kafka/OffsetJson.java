package io.appliance.kafka;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.kafka.common.TopicPartition;

/**
 * The JSON shapes Spark's Kafka options and offset logs use: {"t":{"0":42}} for positions
 * and {"t":[0,1]} for assignments. One place so the reader, writer and checkpoints agree.
 */
public final class OffsetJson {
  /** Topic, then partition; serializable because sorted maps of offsets ship to executors. */
  public static final Comparator<TopicPartition> PARTITION_ORDER = new PartitionOrder();

  private static final class PartitionOrder implements Comparator<TopicPartition>, Serializable {
    private static final long serialVersionUID = 1L;

    @Override
    public int compare(TopicPartition a, TopicPartition b) {
      int byTopic = a.topic().compareTo(b.topic());
      return byTopic != 0 ? byTopic : Integer.compare(a.partition(), b.partition());
    }
  }

  /** Special values inside a JSON position, as in Spark. */
  public static final long EARLIEST = -2L;
  public static final long LATEST = -1L;

  private static final ObjectMapper MAPPER = new ObjectMapper();

  private OffsetJson() {}

  public static String format(Map<TopicPartition, Long> positions) {
    Map<String, Map<String, Long>> byTopic = new TreeMap<>();
    TreeMap<TopicPartition, Long> sorted = new TreeMap<>(PARTITION_ORDER);
    sorted.putAll(positions);
    for (Map.Entry<TopicPartition, Long> e : sorted.entrySet()) {
      byTopic.computeIfAbsent(e.getKey().topic(), t -> new LinkedHashMap<>())
          .put(Integer.toString(e.getKey().partition()), e.getValue());
    }
    try {
      return MAPPER.writeValueAsString(byTopic);
    } catch (Exception e) {
      throw new IllegalStateException("cannot serialize offsets " + positions, e);
    }
  }

  /** Parses {"topic":{"0":42,"1":-2}}; {@code what} names the option for error messages. */
  public static Map<TopicPartition, Long> parsePositions(String json, String what) {
    JsonNode root = readObject(json, what, "{\"topicA\":{\"0\":23,\"1\":-1}}");
    Map<TopicPartition, Long> out = new TreeMap<>(PARTITION_ORDER);
    Iterator<Map.Entry<String, JsonNode>> topics = root.fields();
    while (topics.hasNext()) {
      Map.Entry<String, JsonNode> t = topics.next();
      if (!t.getValue().isObject()) {
        throw bad(what, json, "topic \"" + t.getKey() + "\" must map to {\"partition\": offset}");
      }
      Iterator<Map.Entry<String, JsonNode>> parts = t.getValue().fields();
      while (parts.hasNext()) {
        Map.Entry<String, JsonNode> p = parts.next();
        int partition;
        try {
          partition = Integer.parseInt(p.getKey());
        } catch (NumberFormatException e) {
          throw bad(what, json, "partition \"" + p.getKey() + "\" is not an integer");
        }
        if (!p.getValue().canConvertToLong() || !p.getValue().isIntegralNumber()) {
          throw bad(what, json, "offset for " + t.getKey() + "-" + partition + " is not an integer");
        }
        long offset = p.getValue().asLong();
        if (offset < EARLIEST) {
          throw bad(what, json, "offset " + offset + " is invalid (use >= 0, -2 earliest, -1 latest)");
        }
        out.put(new TopicPartition(t.getKey(), partition), offset);
      }
    }
    return out;
  }

  /** Parses {"topic":[0,1]}. */
  public static List<TopicPartition> parseAssignment(String json, String what) {
    JsonNode root = readObject(json, what, "{\"topicA\":[0,1],\"topicB\":[2,4]}");
    List<TopicPartition> out = new ArrayList<>();
    Iterator<Map.Entry<String, JsonNode>> topics = root.fields();
    while (topics.hasNext()) {
      Map.Entry<String, JsonNode> t = topics.next();
      if (!t.getValue().isArray()) {
        throw bad(what, json, "topic \"" + t.getKey() + "\" must map to a list of partitions");
      }
      for (JsonNode p : t.getValue()) {
        if (!p.isInt()) {
          throw bad(what, json, "partition " + p + " of \"" + t.getKey() + "\" is not an integer");
        }
        out.add(new TopicPartition(t.getKey(), p.asInt()));
      }
    }
    if (out.isEmpty()) {
      throw bad(what, json, "no partitions given");
    }
    return out;
  }

  private static JsonNode readObject(String json, String what, String example) {
    JsonNode root;
    try {
      root = MAPPER.readTree(json);
    } catch (Exception e) {
      throw bad(what, json, "not valid JSON, expected e.g. " + example);
    }
    if (root == null || !root.isObject()) {
      throw bad(what, json, "expected a JSON object, e.g. " + example);
    }
    return root;
  }

  private static IllegalArgumentException bad(String what, String json, String why) {
    return new IllegalArgumentException("Invalid option '" + what + "': " + why + " (got: " + json + ")");
  }
}
