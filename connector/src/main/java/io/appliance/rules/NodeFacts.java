package io.appliance.rules;

import java.lang.reflect.Method;
import java.util.Map;

import org.apache.spark.sql.catalyst.expressions.Cast;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.expressions.StringRegexExpression;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.BinaryType;
import org.apache.spark.sql.types.BooleanType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DateType;
import org.apache.spark.sql.types.MapType;
import org.apache.spark.sql.types.NullType;
import org.apache.spark.sql.types.NumericType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.types.TimestampNTZType;
import org.apache.spark.sql.types.TimestampType;
import scala.jdk.javaapi.CollectionConverters;

/**
 * What the rule engine may assume of a compiled expression, from one table of Catalyst node
 * kinds.
 *
 * <p>Two facts per kind:
 * <ul>
 *   <li><b>cannot raise</b>: evaluating it never throws (for any input). The index skips a
 *   rule for an event only where Spark would have found it false or null without throwing
 *   first, so only conjuncts evaluated before the indexed one must be of such kinds (see
 *   {@link IndexChoice}).
 *   <li><b>stateless</b>: its interpreted {@code eval} keeps no mutable state, so one instance
 *   may serve several task threads at once. Any other rule gets a copy per task.
 * </ul>
 *
 * <p>A kind not in the table is assumed to raise and to keep state: the index then treats the
 * rule as residual, and each task evaluates its own copy. Nothing is lost by an omission but
 * speed.
 */
final class NodeFacts {
  private NodeFacts() {}

  private static final int RAISES = 0;
  private static final int CANNOT_RAISE = 1;
  /**
   * Arithmetic and casts: cannot raise in LEGACY or TRY evaluation mode (ANSI off) where
   * every value involved is of a {@link #nullOnFailure} type; a cast Spark calls an up-cast
   * ({@code Cast.canUpCast}: every value fits) cannot raise in any mode. Interval values
   * raise whatever the mode: a bad interval string ({@code INVALID_INTERVAL_FORMAT}), a
   * number too large for an interval ({@code CAST_OVERFLOW}), interval arithmetic that
   * overflows ({@code INTERVAL_ARITHMETIC_OVERFLOW}).
   */
  private static final int BY_EVAL_MODE = 2;
  /** LIKE / RLIKE: cannot raise and stateless only with a literal pattern that compiles. */
  private static final int BY_PATTERN = 3;

  /** Node class simple name -> its kind, with the reason in the comment beside each group. */
  private static final Map<String, Integer> KINDS = Map.ofEntries(
      // Leaves: a column of the event, a constant.
      Map.entry("BoundReference", CANNOT_RAISE),
      Map.entry("AttributeReference", CANNOT_RAISE),
      Map.entry("Literal", CANNOT_RAISE),
      // Boolean logic and comparisons of values of one type (the analyzer casts first).
      Map.entry("And", CANNOT_RAISE),
      Map.entry("Or", CANNOT_RAISE),
      Map.entry("Not", CANNOT_RAISE),
      Map.entry("IsNull", CANNOT_RAISE),
      Map.entry("IsNotNull", CANNOT_RAISE),
      Map.entry("IsNaN", CANNOT_RAISE),
      Map.entry("EqualTo", CANNOT_RAISE),
      Map.entry("EqualNullSafe", CANNOT_RAISE),
      Map.entry("LessThan", CANNOT_RAISE),
      Map.entry("LessThanOrEqual", CANNOT_RAISE),
      Map.entry("GreaterThan", CANNOT_RAISE),
      Map.entry("GreaterThanOrEqual", CANNOT_RAISE),
      Map.entry("In", CANNOT_RAISE),
      Map.entry("InSet", CANNOT_RAISE),
      // Conditionals.
      Map.entry("Coalesce", CANNOT_RAISE),
      Map.entry("If", CANNOT_RAISE),
      Map.entry("CaseWhen", CANNOT_RAISE),
      Map.entry("NaNvl", CANNOT_RAISE),
      Map.entry("Greatest", CANNOT_RAISE),
      Map.entry("Least", CANNOT_RAISE),
      // A tag by key: null when the key is absent.
      Map.entry("GetMapValue", CANNOT_RAISE),
      // Plain string functions.
      Map.entry("StartsWith", CANNOT_RAISE),
      Map.entry("EndsWith", CANNOT_RAISE),
      Map.entry("Contains", CANNOT_RAISE),
      Map.entry("Upper", CANNOT_RAISE),
      Map.entry("Lower", CANNOT_RAISE),
      Map.entry("Length", CANNOT_RAISE),
      // Null on overflow, a bad string or a zero divisor unless ANSI evaluation is on.
      Map.entry("Cast", BY_EVAL_MODE),
      Map.entry("Add", BY_EVAL_MODE),
      Map.entry("Subtract", BY_EVAL_MODE),
      Map.entry("Multiply", BY_EVAL_MODE),
      Map.entry("Divide", BY_EVAL_MODE),
      Map.entry("Remainder", BY_EVAL_MODE),
      Map.entry("Abs", BY_EVAL_MODE),
      Map.entry("UnaryMinus", BY_EVAL_MODE),
      // The compiled pattern is cached once (a lazy value) when the pattern is a literal.
      Map.entry("Like", BY_PATTERN),
      Map.entry("RLike", BY_PATTERN));

  /** Whether evaluating {@code e} can never throw. */
  static boolean cannotRaise(Expression e) {
    return every(e, true);
  }

  /** Whether one instance of {@code e} may be evaluated by several threads at once. */
  static boolean stateless(Expression e) {
    return every(e, false);
  }

  private static boolean every(Expression e, boolean raising) {
    if (!holds(e, raising)) {
      return false;
    }
    for (Expression child : CollectionConverters.asJava(e.children())) {
      if (!every(child, raising)) {
        return false;
      }
    }
    return true;
  }

  private static boolean holds(Expression e, boolean raising) {
    Integer kind = KINDS.get(e.getClass().getSimpleName());
    if (kind == null || kind == RAISES) {
      return false;
    }
    switch (kind) {
      case BY_EVAL_MODE:
        // Evaluation mode and the types decide raising; state is never kept.
        return !raising || upCast(e) || (lenient(e) && nullOnFailureTypes(e));
      case BY_PATTERN:
        return literalPatternCompiles((StringRegexExpression) e);
      default:
        return true;
    }
  }

  private static boolean upCast(Expression e) {
    return e instanceof Cast
        && Cast.canUpCast(((Cast) e).child().dataType(), ((Cast) e).dataType());
  }

  /** Whether {@code e}'s value and its children's are all of {@link #nullOnFailure} types. */
  private static boolean nullOnFailureTypes(Expression e) {
    if (!nullOnFailure(e.dataType())) {
      return false;
    }
    for (Expression child : CollectionConverters.asJava(e.children())) {
      if (!nullOnFailure(child.dataType())) {
        return false;
      }
    }
    return true;
  }

  /**
   * The types whose casts and arithmetic yield null, never an error, on a value they cannot
   * represent with ANSI off (a bad number string, an overflowing decimal, a zero divisor,
   * NaN to an integer): numbers, strings, booleans, dates, timestamps, bytes, and arrays,
   * maps and structs of them. Intervals, times, variants and any type not named here are
   * taken to raise.
   */
  static boolean nullOnFailure(DataType t) {
    if (t instanceof NumericType || t instanceof StringType || t instanceof BooleanType
        || t instanceof DateType || t instanceof TimestampType
        || t instanceof TimestampNTZType || t instanceof BinaryType || t instanceof NullType) {
      return true;
    }
    if (t instanceof ArrayType) {
      return nullOnFailure(((ArrayType) t).elementType());
    }
    if (t instanceof MapType) {
      return nullOnFailure(((MapType) t).keyType())
          && nullOnFailure(((MapType) t).valueType());
    }
    if (t instanceof StructType) {
      for (StructField f : ((StructType) t).fields()) {
        if (!nullOnFailure(f.dataType())) {
          return false;
        }
      }
      return true;
    }
    return false;
  }

  /** LEGACY or TRY evaluation mode (found by name: the accessor differs between node kinds). */
  private static boolean lenient(Expression e) {
    Object mode = call(e, "evalMode");
    if (mode == null) {
      Object context = call(e, "evalContext");
      mode = context == null ? null : call(context, "evalMode");
    }
    String name = mode == null ? "" : mode.toString();
    return name.equals("LEGACY") || name.equals("TRY");
  }

  private static Object call(Object target, String method) {
    try {
      Method m = target.getClass().getMethod(method);
      return m.invoke(target);
    } catch (ReflectiveOperationException | RuntimeException e) {
      return null;
    }
  }

  private static boolean literalPatternCompiles(StringRegexExpression e) {
    Expression pattern = e.right();
    if (!(pattern instanceof Literal) || ((Literal) pattern).value() == null) {
      return false;
    }
    try {
      java.util.regex.Pattern.compile(e.escape(((Literal) pattern).value().toString()));
      return true;
    } catch (RuntimeException bad) {
      return false;
    }
  }
}
