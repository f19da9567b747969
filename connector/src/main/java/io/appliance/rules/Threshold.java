package io.appliance.rules;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.List;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.BinaryComparison;
import org.apache.spark.sql.catalyst.expressions.BoundReference;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.GreaterThan;
import org.apache.spark.sql.catalyst.expressions.GreaterThanOrEqual;
import org.apache.spark.sql.catalyst.expressions.LessThan;
import org.apache.spark.sql.catalyst.expressions.LessThanOrEqual;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.types.DoubleType;

/**
 * A conjunct of a rule that one primitive comparison decides: a number field against a
 * constant ({@code value >= 98}, {@code 90 < value}), checked before the rule's expression is
 * evaluated for a candidate event.
 *
 * <p>Why: the index narrows the rules to those whose key the event has, but an operator's
 * rules are mostly {@code metric = 'x' AND value > threshold}, so with thousands of them the
 * rules sharing one metric name are all candidates for each of its events, and most of them
 * fail on the threshold. Spark's interpreted {@code eval} of the whole tree costs a walk
 * of its nodes per candidate; this is one double comparison.
 *
 * <p>Why a false threshold may stand for the whole rule: Spark's {@code And} stops at the
 * first false conjunct in evaluation order (left to right), whatever the tree's shape, so a
 * rule whose threshold is false yields false, provided nothing before the threshold could
 * throw ({@link NodeFacts#cannotRaise}) or would have changed state had it run (only
 * deterministic conjuncts go before one). A NULL field or NaN never decides here: the
 * comparison is then NULL (Spark's {@code AND} goes on past it) or true for NaN in Spark's
 * ordering, so the rule is evaluated as written. Java's primitive comparison and Spark's
 * agree on every other double, {@code -0.0} and {@code 0.0} included (equal in both).
 */
final class Threshold implements Serializable {
  private static final long serialVersionUID = 1L;
  private static final Threshold[] NONE = new Threshold[0];

  private enum Op {
    GT(">"), GE(">="), LT("<"), LE("<=");

    final String sql;

    Op(String sql) {
      this.sql = sql;
    }

    /** The same comparison with its sides swapped ({@code 90 < value} is {@code value > 90}). */
    Op flipped() {
      switch (this) {
        case GT: return LT;
        case GE: return LE;
        case LT: return GT;
        default: return GE;
      }
    }

    boolean holds(double v, double bound) {
      switch (this) {
        case GT: return v > bound;
        case GE: return v >= bound;
        case LT: return v < bound;
        default: return v <= bound;
      }
    }
  }

  private final int ordinal;
  private final Op op;
  private final double bound;
  private final String field;

  private Threshold(int ordinal, Op op, double bound, String field) {
    this.ordinal = ordinal;
    this.op = op;
    this.bound = bound;
    this.field = field;
  }

  /**
   * The thresholds of {@code rule} that may decide it alone: its conjuncts of that shape, in
   * evaluation order, up to the first conjunct that could throw or is not deterministic.
   */
  static Threshold[] of(Expression rule, String[] fieldNames) {
    List<Threshold> out = new ArrayList<>();
    for (Expression conjunct : IndexChoice.conjuncts(rule)) {
      Threshold t = comparison(conjunct, fieldNames);
      if (t != null) {
        out.add(t);
      }
      if (!NodeFacts.cannotRaise(conjunct) || !conjunct.deterministic()) {
        break;
      }
    }
    return out.isEmpty() ? NONE : out.toArray(NONE);
  }

  private static Threshold comparison(Expression c, String[] fieldNames) {
    Op op = c instanceof GreaterThan ? Op.GT
        : c instanceof GreaterThanOrEqual ? Op.GE
        : c instanceof LessThan ? Op.LT
        : c instanceof LessThanOrEqual ? Op.LE : null;
    if (op == null) {
      return null;
    }
    BinaryComparison b = (BinaryComparison) c;
    Threshold t = fieldAgainstConstant(b.left(), b.right(), op, fieldNames);
    return t != null ? t : fieldAgainstConstant(b.right(), b.left(), op.flipped(), fieldNames);
  }

  private static Threshold fieldAgainstConstant(Expression field, Expression constant, Op op,
      String[] fieldNames) {
    if (!(field instanceof BoundReference) || !(field.dataType() instanceof DoubleType)
        || !(constant instanceof Literal)) {
      return null;
    }
    Object v = ((Literal) constant).value();
    if (!(v instanceof Double) || ((Double) v).isNaN()) {
      return null;  // NULL: the comparison is NULL; NaN: Spark's ordering, not Java's
    }
    int ordinal = ((BoundReference) field).ordinal();
    return new Threshold(ordinal, op, (Double) v, fieldNames[ordinal]);
  }

  /** Whether {@code event} fails this threshold, so the rule cannot match it. */
  boolean excludes(InternalRow event) {
    if (event.isNullAt(ordinal)) {
      return false;
    }
    double v = event.getDouble(ordinal);
    return !Double.isNaN(v) && !op.holds(v, bound);
  }

  /** Whether {@code event} fails any of {@code thresholds}. */
  static boolean anyExcludes(Threshold[] thresholds, InternalRow event) {
    for (Threshold t : thresholds) {
      if (t.excludes(event)) {
        return true;
      }
    }
    return false;
  }

  @Override
  public String toString() {
    return field + " " + op.sql + " " + bound;
  }
}
