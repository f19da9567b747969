package io.appliance.rules;

import java.io.Serializable;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * One rule ready to evaluate: its {@code when} analyzed and optimized by the driver's Spark
 * session (the appliance's SQL settings), with its columns bound to the event row's positions,
 * and the row the alert lists it by.
 */
final class CompiledRule implements Serializable {
  private static final long serialVersionUID = 1L;

  final RuleDefinition definition;
  /** The bound, optimized {@code when}: a boolean expression over the event row. */
  final Expression when;
  /** Whether task threads may share {@link #when} ({@link NodeFacts#stateless}); if not,
   * each task evaluates its own {@link #taskCopy}. */
  final boolean shared;
  /** The conjunct the index files it under; null for a residual rule. */
  final IndexChoice index;
  /** Conjuncts a primitive comparison decides, checked first ({@link Threshold}). */
  final Threshold[] thresholds;
  /** {@code struct<id, severity, message, ordinal>}, as the alert's {@code rules} list has it. */
  final InternalRow listed;
  /** {@link #when} serialized (on first need), what each task's copy is read back from. */
  private transient volatile byte[] whenBytes;

  CompiledRule(RuleDefinition definition, Expression when, IndexChoice index,
      Threshold[] thresholds) {
    this.definition = definition;
    this.when = when;
    this.shared = NodeFacts.stateless(when);
    this.index = index;
    this.thresholds = thresholds;
    this.listed = new GenericInternalRow(new Object[] {
        UTF8String.fromString(definition.id), UTF8String.fromString(definition.severity),
        UTF8String.fromString(definition.message), definition.ordinal});
  }

  /**
   * A copy of {@link #when} for one task, built afresh from its serialized form: it shares no
   * object with {@link #when} or with another task's copy (a lambda's variable, a cache, any
   * state a node keeps), whatever its node kinds, while what is shared inside the expression
   * stays shared inside the copy. {@code clone()} would not do: it copies the tree's nodes
   * but hands each the same constructor arguments, so a lambda's variable (a value holder
   * passed to it) would be one holder written by every task at once.
   */
  Expression taskCopy() {
    byte[] bytes = whenBytes;
    if (bytes == null) {
      bytes = Serialized.write(when, "rule " + definition.id);
      whenBytes = bytes;  // two tasks may both write it: the same bytes
    }
    return (Expression) Serialized.read(bytes, Serialized.taskLoader(), "rule " + definition.id);
  }
}
