package io.appliance.kafka;

import java.io.Serializable;
import java.util.Collections;
import java.util.Map;

import org.apache.kafka.common.TopicPartition;

/** What startingOffsets / endingOffsets asked for: earliest, latest or explicit positions. */
public final class OffsetSpec implements Serializable {
  private static final long serialVersionUID = 1L;

  public enum Kind { EARLIEST, LATEST, SPECIFIC }

  private final Kind kind;
  private final Map<TopicPartition, Long> positions;

  private OffsetSpec(Kind kind, Map<TopicPartition, Long> positions) {
    this.kind = kind;
    this.positions = positions;
  }

  public static final OffsetSpec EARLIEST = new OffsetSpec(Kind.EARLIEST, Collections.emptyMap());
  public static final OffsetSpec LATEST = new OffsetSpec(Kind.LATEST, Collections.emptyMap());

  public static OffsetSpec parse(String option, String raw) {
    String v = raw.trim();
    if (v.equalsIgnoreCase("earliest")) {
      return EARLIEST;
    }
    if (v.equalsIgnoreCase("latest")) {
      return LATEST;
    }
    return new OffsetSpec(Kind.SPECIFIC, OffsetJson.parsePositions(v, option));
  }

  public Kind kind() {
    return kind;
  }

  /** Explicit positions (may contain -2 earliest / -1 latest); empty unless SPECIFIC. */
  public Map<TopicPartition, Long> positions() {
    return positions;
  }

  @Override
  public String toString() {
    return kind == Kind.SPECIFIC ? OffsetJson.format(positions) : kind.name().toLowerCase();
  }
}
