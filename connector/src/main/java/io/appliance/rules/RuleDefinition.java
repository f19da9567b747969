package io.appliance.rules;

import java.io.Serializable;

/**
 * One alert rule as the rules file states it, after the Python side's structural checks:
 * {@code id}, {@code severity} (with its ordinal, 1 = info ... 3 = critical), {@code message}
 * and the Spark SQL {@code when} text. What the alert record lists for a matched rule comes
 * from here; what decides the match is the compiled {@code when} ({@link CompiledRule}).
 */
public final class RuleDefinition implements Serializable {
  private static final long serialVersionUID = 1L;

  final String id;
  final String severity;
  final int ordinal;
  final String message;
  final String when;

  RuleDefinition(String id, String severity, int ordinal, String message, String when) {
    this.id = id;
    this.severity = severity;
    this.ordinal = ordinal;
    this.message = message;
    this.when = when;
  }
}
