package io.appliance.rules;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;

import org.apache.spark.sql.catalyst.expressions.And;
import org.apache.spark.sql.catalyst.expressions.AttributeReference;
import org.apache.spark.sql.catalyst.expressions.BinaryComparison;
import org.apache.spark.sql.catalyst.expressions.Cast;
import org.apache.spark.sql.catalyst.expressions.Cast$;
import org.apache.spark.sql.catalyst.expressions.EqualNullSafe;
import org.apache.spark.sql.catalyst.expressions.EqualTo;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.GetMapValue;
import org.apache.spark.sql.catalyst.expressions.GreaterThan;
import org.apache.spark.sql.catalyst.expressions.GreaterThanOrEqual;
import org.apache.spark.sql.catalyst.expressions.ILike;
import org.apache.spark.sql.catalyst.expressions.In;
import org.apache.spark.sql.catalyst.expressions.LessThan;
import org.apache.spark.sql.catalyst.expressions.LessThanOrEqual;
import org.apache.spark.sql.catalyst.expressions.Like;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.expressions.RLike;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.MapType;
import org.apache.spark.sql.types.NumericType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.unsafe.types.UTF8String;
import scala.jdk.javaapi.CollectionConverters;

/**
 * Why an analyzed rule can never match (or match only by accident), found in Spark's own
 * reading of it: the casts its analyzer added, the literals it compares.
 *
 * <ul>
 *   <li>Text that is not a number compared with a number ({@code value > 'abc'}): Spark
 *   casts the text to a number, NULL, so the comparison is NULL for every event.
 *   <li>A text field compared with a number ({@code metric = 95}): Spark casts the field to
 *   a number, NULL for every value that is not one.
 *   <li>An IN of text and numbers ({@code value IN ('a', 1)}): Spark compares them as text,
 *   where the number 1 reads '1.0'.
 *   <li>LIKE on a number ({@code value LIKE '9%'}): it matches the number's text.
 *   <li>A top-level AND that no event satisfies: a text field equal to two different
 *   values, a number in an empty range.
 * </ul>
 *
 * <p>Only the casts the analyzer added count ({@code CAST(value AS STRING) LIKE '9%'} says
 * what it means). The rules check without a JVM ({@code appliance.rules.never_match} and
 * {@code rule_types}) finds the same, so both give one verdict.
 */
final class NeverMatch {
  private NeverMatch() {}

  /** The first reason {@code analyzed} can never match, or null. */
  static String problem(Expression analyzed) {
    String found = walk(analyzed);
    return found != null ? found : contradiction(analyzed);
  }

  private static String walk(Expression e) {
    String here = here(e);
    if (here != null) {
      return here;
    }
    for (Expression child : CollectionConverters.asJava(e.children())) {
      String found = walk(child);
      if (found != null) {
        return found;
      }
    }
    return null;
  }

  private static String here(Expression e) {
    if (e instanceof BinaryComparison) {
      Expression l = e.children().apply(0);
      Expression r = e.children().apply(1);
      String found = comparison(l, r);
      return found != null ? found : comparison(r, l);
    }
    if (e instanceof In) {
      In in = (In) e;
      boolean mixed = textNumberCast(in.value());
      for (Expression item : CollectionConverters.asJava(in.list())) {
        mixed |= textNumberCast(item);
      }
      if (mixed) {
        return "IN of two types: " + describe(strip(in.value())) + " and its list; Spark "
            + "compares them as text, where the number 1 reads '1.0': make them one type";
      }
      return null;
    }
    if (e instanceof Like || e instanceof ILike || e instanceof RLike) {
      Expression value = e.children().apply(0);
      if (implicitCast(value) && ((Cast) value).child().dataType() instanceof NumericType) {
        Expression number = ((Cast) value).child();
        return "LIKE on a number: " + describe(number) + " is " + a(number.dataType())
            + ", and LIKE matches its text (95.0 is "
            + "'95.0'); write CAST(" + describe(number) + " AS STRING) LIKE ... if that is meant";
      }
    }
    return null;
  }

  /** {@code side} compared with {@code other}: a number made of text that is not one, or a
   * text field made a number to meet a number literal. */
  private static String comparison(Expression side, Expression other) {
    if (!implicitCast(side) || !(side.dataType() instanceof NumericType)) {
      return null;
    }
    Expression from = ((Cast) side).child();
    if (from instanceof Literal && ((Literal) from).value() instanceof UTF8String
        && castsToNull(side)) {
      return "can never match: '" + ((Literal) from).value() + "' is not a number, and "
          + describe(other) + " is " + a(other.dataType());
    }
    String field = textField(from);
    Expression number = implicitCast(other) ? ((Cast) other).child() : other;
    if (field != null && numberLiteral(other) != null) {
      return "compares the text field " + field + " (a string) with the number "
          + number.sql() + " (" + a(number.dataType()) + "): Spark compares "
          + "them as numbers, so it matches no " + field + " that is not a number; write '"
          + number.sql() + "' to compare text";
    }
    return null;
  }

  /** Whether the constant {@code cast} is NULL, or throws (ANSI on): no number either way. */
  private static boolean castsToNull(Expression cast) {
    try {
      return cast.eval(null) == null;
    } catch (RuntimeException e) {
      return true;
    }
  }

  /** "a double", "an int". */
  private static String a(DataType t) {
    String name = t.simpleString();
    return ("aeiou".indexOf(name.charAt(0)) >= 0 ? "an " : "a ") + name;
  }

  private static boolean implicitCast(Expression e) {
    return e instanceof Cast && e.getTagValue(Cast$.MODULE$.USER_SPECIFIED_CAST()).isEmpty();
  }

  /** An implicit cast between text and a number (either way). */
  private static boolean textNumberCast(Expression e) {
    if (!implicitCast(e)) {
      return false;
    }
    DataType from = ((Cast) e).child().dataType();
    DataType to = e.dataType();
    return (from instanceof NumericType && to instanceof StringType)
        || (from instanceof StringType && to instanceof NumericType);
  }

  /** {@code e} without the analyzer's casts to its own type. */
  private static Expression strip(Expression e) {
    while (implicitCast(e) && ((Cast) e).child().dataType().equals(e.dataType())) {
      e = ((Cast) e).child();
    }
    return e;
  }

  private static String describe(Expression e) {
    String field = textField(e);
    if (field != null) {
      return field;
    }
    if (e instanceof AttributeReference) {
      return ((AttributeReference) e).name().toLowerCase(Locale.ROOT);
    }
    return e.sql();
  }

  /** {@code metric} or {@code tags['env']} where {@code e} reads a text field or a map entry
   * by a literal key (compared byte for byte), else null. */
  private static String textField(Expression e) {
    if (e instanceof AttributeReference && binaryText(e.dataType())) {
      return ((AttributeReference) e).name().toLowerCase(Locale.ROOT);
    }
    if (e instanceof GetMapValue) {
      GetMapValue get = (GetMapValue) e;
      if (get.left() instanceof AttributeReference && get.left().dataType() instanceof MapType
          && get.right() instanceof Literal
          && ((Literal) get.right()).value() instanceof UTF8String
          && binaryText(get.dataType())) {
        return ((AttributeReference) get.left()).name().toLowerCase(Locale.ROOT) + "['"
            + ((Literal) get.right()).value() + "']";
      }
    }
    return null;
  }

  private static boolean binaryText(DataType t) {
    return t instanceof StringType && ((StringType) t).supportsBinaryEquality();
  }

  // -- the top-level AND ------------------------------------------------------------------

  private static String contradiction(Expression rule) {
    Map<String, Set<UTF8String>> texts = new HashMap<>();
    Map<String, List<String>> asked = new HashMap<>();
    Map<String, double[]> ranges = new HashMap<>();  // low, lowIncl(1/0), high, highIncl
    Map<String, List<String>> said = new HashMap<>();
    for (Expression c : conjuncts(rule)) {
      Object[] text = textValues(c);
      if (text != null) {
        String name = (String) text[0];
        @SuppressWarnings("unchecked")
        Set<UTF8String> values = (Set<UTF8String>) text[1];
        List<String> listed = new ArrayList<>();
        for (UTF8String v : values) {
          listed.add("'" + v + "'");
        }
        java.util.Collections.sort(listed);
        asked.computeIfAbsent(name, k -> new ArrayList<>()).add(
            listed.size() == 1 ? listed.get(0) : "one of " + String.join(", ", listed));
        if (values.isEmpty()) {
          return "can never match: " + name + " IN lists no value";
        }
        Set<UTF8String> allowed = texts.get(name);
        if (allowed == null) {
          allowed = new LinkedHashSet<>(values);
        } else {
          allowed.retainAll(values);
        }
        if (allowed.isEmpty()) {
          return "can never match: " + name + " (a string) cannot be "
              + String.join(" and ", asked.get(name)) + " at once";
        }
        texts.put(name, allowed);
        continue;
      }
      Object[] bound = numberBound(c);
      if (bound != null) {
        String name = (String) bound[0];
        String op = (String) bound[1];
        double v = (Double) bound[2];
        double[] r = ranges.computeIfAbsent(name, k -> new double[] {
            Double.NEGATIVE_INFINITY, 1, Double.POSITIVE_INFINITY, 1});
        if (op.startsWith(">") || op.equals("=")) {
          boolean incl = !op.equals(">");
          if (v > r[0] || (v == r[0] && !incl)) {
            r[0] = v;
            r[1] = incl ? 1 : 0;
          }
        }
        if (op.startsWith("<") || op.equals("=")) {
          boolean incl = !op.equals("<");
          if (v < r[2] || (v == r[2] && !incl)) {
            r[2] = v;
            r[3] = incl ? 1 : 0;
          }
        }
        said.computeIfAbsent(name, k -> new ArrayList<>()).add(op + " " + number(v));
        if (r[0] > r[2] || (r[0] == r[2] && (r[1] == 0 || r[3] == 0))) {
          return "can never match: no " + name + " (a double) is "
              + String.join(" and ", said.get(name));
        }
      }
    }
    return null;
  }

  private static String number(double v) {
    return v == Math.rint(v) && Math.abs(v) < 1e15 ? Long.toString((long) v) : Double.toString(v);
  }

  private static List<Expression> conjuncts(Expression e) {
    List<Expression> out = new ArrayList<>();
    if (e instanceof And) {
      out.addAll(conjuncts(((And) e).left()));
      out.addAll(conjuncts(((And) e).right()));
    } else {
      out.add(e);
    }
    return out;
  }

  /** {@code field = 'x'}, {@code field <=> 'x'}, {@code field IN ('x', NULL)}: {name, values}. */
  private static Object[] textValues(Expression c) {
    if (c instanceof EqualTo || c instanceof EqualNullSafe) {
      for (int side = 0; side < 2; side++) {
        String name = textField(strip(c.children().apply(side)));
        Expression v = strip(c.children().apply(1 - side));
        if (name != null && v instanceof Literal && ((Literal) v).value() instanceof UTF8String) {
          Set<UTF8String> values = new LinkedHashSet<>();
          values.add((UTF8String) ((Literal) v).value());
          return new Object[] {name, values};
        }
      }
      return null;
    }
    if (c instanceof In) {
      In in = (In) c;
      String name = textField(strip(in.value()));
      if (name == null) {
        return null;
      }
      Set<UTF8String> values = new LinkedHashSet<>();
      for (Expression item : CollectionConverters.asJava(in.list())) {
        Expression v = strip(item);
        if (v instanceof Cast && ((Cast) v).child() instanceof Literal
            && ((Literal) ((Cast) v).child()).value() == null) {
          continue;  // NULL, cast to the list's type
        }
        if (!(v instanceof Literal)) {
          return null;
        }
        Object value = ((Literal) v).value();
        if (value instanceof UTF8String) {
          values.add((UTF8String) value);
        } else if (value != null) {
          return null;
        }
      }
      return new Object[] {name, values};
    }
    return null;
  }

  private static final Map<Class<?>, String> OPS = Map.of(EqualTo.class, "=",
      LessThan.class, "<", LessThanOrEqual.class, "<=", GreaterThan.class, ">",
      GreaterThanOrEqual.class, ">=");
  private static final Map<String, String> FLIP = Map.of("=", "=", "<", ">", "<=", ">=",
      ">", "<", ">=", "<=");

  /** {@code value > 5}, {@code 5 <= ts}: {name, operator seen from the field, number}. */
  private static Object[] numberBound(Expression c) {
    String op = OPS.get(c.getClass());
    if (op == null) {
      return null;
    }
    for (int side = 0; side < 2; side++) {
      Expression f = strip(c.children().apply(side));
      Double v = numberLiteral(c.children().apply(1 - side));
      if (f instanceof AttributeReference && f.dataType() instanceof NumericType && v != null) {
        return new Object[] {((AttributeReference) f).name().toLowerCase(Locale.ROOT),
            side == 0 ? op : FLIP.get(op), v};
      }
    }
    return null;
  }

  /** A number literal (or the analyzer's cast of one to another number type), else null. */
  private static Double numberLiteral(Expression e) {
    Expression inner = e;
    if (implicitCast(inner)) {
      inner = ((Cast) inner).child();
    }
    if (!(inner instanceof Literal) || !(inner.dataType() instanceof NumericType)) {
      return null;
    }
    Object v;
    try {
      v = e.eval(null);
    } catch (RuntimeException overflow) {
      return null;
    }
    if (v instanceof Number) {
      return ((Number) v).doubleValue();
    }
    if (v instanceof org.apache.spark.sql.types.Decimal) {
      return ((org.apache.spark.sql.types.Decimal) v).toDouble();
    }
    return null;
  }
}
