package io.appliance.rules;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;

import org.apache.spark.sql.catalyst.expressions.And;
import org.apache.spark.sql.catalyst.expressions.EqualNullSafe;
import org.apache.spark.sql.catalyst.expressions.EqualTo;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.In;
import org.apache.spark.sql.catalyst.expressions.InSet;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.expressions.Or;
import org.apache.spark.unsafe.types.UTF8String;
import scala.jdk.javaapi.CollectionConverters;

/**
 * The conjunct a rule is indexed by: a key the event carries and the values that key must have
 * for the rule to match ({@code metric = 'cpu.util'}, {@code source IN ('a', 'b')},
 * {@code tags['env'] = 'prod'}, or an OR of such equalities on one key).
 *
 * <p>Why the index may skip a rule: a rule {@code c1 AND ... AND ck AND ...} indexed by
 * {@code ck} is evaluated whole for an event whose key has one of the values, and not at all
 * otherwise. Where the key has none of the values, {@code ck} is false (or null for an absent
 * map entry), so Spark's {@code AND} yields false or null: no match, the same as skipping. Spark
 * evaluates the conjuncts left to right and stops at the first false one, so a conjunct before
 * {@code ck} that throws would have failed the query where skipping would not; hence {@code ck}
 * is chosen only among conjuncts preceded by kinds that cannot throw ({@link NodeFacts}).
 */
final class IndexChoice implements Serializable {
  private static final long serialVersionUID = 1L;

  final IndexKey key;
  /** The values that can match, in the order written; empty: the rule can never match. */
  final Set<UTF8String> values;

  private IndexChoice(IndexKey key, Set<UTF8String> values) {
    this.key = key;
    this.values = values;
  }

  /**
   * The best conjunct of {@code rule} to index it by, or null (a residual rule, evaluated for
   * every event). {@code preference} ranks field names (first is best); a map entry ranks after
   * them; between equal ranks, fewer values win.
   */
  static IndexChoice choose(Expression rule, String[] fieldNames, List<String> preference) {
    IndexChoice best = null;
    for (Expression conjunct : conjuncts(rule)) {
      IndexChoice choice = of(conjunct, fieldNames);
      if (choice != null && (best == null || better(choice, best, preference))) {
        best = choice;
      }
      if (!NodeFacts.cannotRaise(conjunct)) {
        break;  // the conjuncts after this one are evaluated only if it did not throw
      }
    }
    return best;
  }

  private static boolean better(IndexChoice a, IndexChoice b, List<String> preference) {
    int ra = rank(a.key, preference);
    int rb = rank(b.key, preference);
    return ra != rb ? ra < rb : a.values.size() < b.values.size();
  }

  private static int rank(IndexKey key, List<String> preference) {
    if (key.mapKey != null) {
      return preference.size();
    }
    int i = preference.indexOf(key.name);
    return i < 0 ? preference.size() + 1 : i;
  }

  /** The AND tree's leaves in Spark's evaluation order (left to right). */
  static List<Expression> conjuncts(Expression e) {
    List<Expression> out = new ArrayList<>();
    collect(e, out);
    return out;
  }

  private static void collect(Expression e, List<Expression> out) {
    if (e instanceof And) {
      collect(((And) e).left(), out);
      collect(((And) e).right(), out);
    } else {
      out.add(e);
    }
  }

  /** The key and values {@code c} requires, or null if it is not an equality of that shape. */
  static IndexChoice of(Expression c, String[] fieldNames) {
    if (c instanceof EqualTo || c instanceof EqualNullSafe) {
      Expression l = c.children().apply(0);
      Expression r = c.children().apply(1);
      IndexChoice one = equality(l, r, fieldNames);
      return one != null ? one : equality(r, l, fieldNames);
    }
    if (c instanceof In) {
      In in = (In) c;
      IndexKey key = IndexKey.of(in.value(), fieldNames);
      if (key == null) {
        return null;
      }
      Set<UTF8String> values = new LinkedHashSet<>();
      for (Expression item : CollectionConverters.asJava(in.list())) {
        if (!(item instanceof Literal)) {
          return null;
        }
        Object v = ((Literal) item).value();
        if (v instanceof UTF8String) {
          values.add(((UTF8String) v).clone());
        } else if (v != null) {
          return null;
        }
      }
      return new IndexChoice(key, values);
    }
    if (c instanceof InSet) {
      InSet in = (InSet) c;
      IndexKey key = IndexKey.of(in.child(), fieldNames);
      if (key == null) {
        return null;
      }
      Set<UTF8String> values = new LinkedHashSet<>();
      for (Object v : CollectionConverters.asJava(in.hset())) {
        if (v instanceof UTF8String) {
          values.add(((UTF8String) v).clone());
        } else if (v != null) {
          return null;
        }
      }
      return new IndexChoice(key, values);
    }
    if (c instanceof Or) {
      IndexChoice a = of(((Or) c).left(), fieldNames);
      IndexChoice b = of(((Or) c).right(), fieldNames);
      if (a == null || b == null || !a.key.equals(b.key)) {
        return null;
      }
      Set<UTF8String> values = new LinkedHashSet<>(a.values);
      values.addAll(b.values);
      return new IndexChoice(a.key, values);
    }
    return null;
  }

  private static IndexChoice equality(Expression field, Expression value, String[] fieldNames) {
    IndexKey key = IndexKey.of(field, fieldNames);
    if (key == null || !(value instanceof Literal)) {
      return null;
    }
    Object v = ((Literal) value).value();
    if (!(v instanceof UTF8String)) {
      // A null literal: "= NULL" is null, "<=> NULL" true only for an absent value; neither
      // is an equality the index can look up.
      return null;
    }
    Set<UTF8String> values = new LinkedHashSet<>();
    values.add(((UTF8String) v).clone());
    return new IndexChoice(key, values);
  }
}
