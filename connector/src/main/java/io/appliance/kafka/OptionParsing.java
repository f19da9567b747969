package io.appliance.kafka;

import java.util.Collections;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;

import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * Value parsing shared by the source's and the sink's options: the {@code kafka.*} client
 * properties (with the table of properties the connector owns) and typed values. Every error
 * names the option, so a wrong query fails at start with a message the user can act on.
 */
final class OptionParsing {
  static final String PREFIX = "kafka.";
  static final String BOOTSTRAP = "kafka.bootstrap.servers";

  private OptionParsing() {}

  /**
   * The {@code kafka.*} options with the prefix stripped. {@code owned} maps each client
   * property the connector sets itself to the reason the user may not: setting one is an error.
   */
  static Map<String, String> kafkaParams(CaseInsensitiveStringMap options, Map<String, String> owned) {
    Map<String, String> params = new TreeMap<>();
    for (Map.Entry<String, String> e : options.asCaseSensitiveMap().entrySet()) {
      String key = e.getKey();
      if (key.toLowerCase(Locale.ROOT).startsWith(PREFIX)) {
        String name = key.substring(PREFIX.length());
        String why = owned.get(name);
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

  /** A positive integer, or null when the option is absent. */
  static Long positiveLong(CaseInsensitiveStringMap options, String name) {
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

  static long positiveLong(CaseInsensitiveStringMap options, String name, long dflt) {
    Long v = positiveLong(options, name);
    return v == null ? dflt : v;
  }

  /** A finite number >= 0 (a controller gain). */
  static double nonNegativeDouble(CaseInsensitiveStringMap options, String name, double dflt) {
    if (!options.containsKey(name)) {
      return dflt;
    }
    String raw = options.get(name).trim();
    double v;
    try {
      v = Double.parseDouble(raw);
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException("Option '" + name + "' must be a number >= 0, got '" + raw + "'");
    }
    if (!(v >= 0) || Double.isInfinite(v)) {
      throw new IllegalArgumentException("Option '" + name + "' must be a number >= 0, got '" + raw + "'");
    }
    return v;
  }

  static long durationMillis(CaseInsensitiveStringMap options, String name, long dflt) {
    return options.containsKey(name) ? Durations.parseMillis(name, options.get(name)) : dflt;
  }

  static boolean bool(CaseInsensitiveStringMap options, String name, boolean dflt) {
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
}
