package io.appliance.kafka;

import java.util.Locale;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Parses Spark-style durations ("15m", "30 seconds", "500ms"): maxTriggerDelay,
 * adaptiveTargetBatchDuration, and the producer cache's Spark settings (ProducerCache).
 */
final class Durations {
  private static final Pattern FORMAT = Pattern.compile("(\\d+)\\s*([a-z]*)");

  private Durations() {}

  static long parseMillis(String option, String raw) {
    Matcher m = FORMAT.matcher(raw.trim().toLowerCase(Locale.ROOT));
    if (!m.matches()) {
      throw bad(option, raw);
    }
    long n = Long.parseLong(m.group(1));
    switch (m.group(2)) {
      case "ms": case "millisecond": case "milliseconds": return n;
      case "": case "s": case "sec": case "second": case "seconds": return n * 1000L;
      case "m": case "min": case "minute": case "minutes": return n * 60_000L;
      case "h": case "hour": case "hours": return n * 3_600_000L;
      case "d": case "day": case "days": return n * 86_400_000L;
      default: throw bad(option, raw);
    }
  }

  private static IllegalArgumentException bad(String option, String raw) {
    return new IllegalArgumentException(
        "Option '" + option + "' must be a duration like '15m', '30s' or '500ms', got '" + raw + "'");
  }
}
