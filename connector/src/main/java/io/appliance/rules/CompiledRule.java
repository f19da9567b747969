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
  /** Whether task threads may share {@link #when} ({@link NodeFacts#stateless}). */
  final boolean shared;
  /** The conjunct the index files it under; null for a residual rule. */
  final IndexChoice index;
  /** {@code struct<id, severity, message, ordinal>}, as the alert's {@code rules} list has it. */
  final InternalRow listed;

  CompiledRule(RuleDefinition definition, Expression when, IndexChoice index) {
    this.definition = definition;
    this.when = when;
    this.shared = NodeFacts.stateless(when);
    this.index = index;
    this.listed = new GenericInternalRow(new Object[] {
        UTF8String.fromString(definition.id), UTF8String.fromString(definition.severity),
        UTF8String.fromString(definition.message), definition.ordinal});
  }
}
