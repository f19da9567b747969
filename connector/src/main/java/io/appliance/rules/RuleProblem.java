package io.appliance.rules;

/** Why one rule cannot run: its position in the file's rule list and Spark's reason. */
public final class RuleProblem {
  final int index;
  final String reason;

  RuleProblem(int index, String reason) {
    this.index = index;
    this.reason = reason;
  }
}
