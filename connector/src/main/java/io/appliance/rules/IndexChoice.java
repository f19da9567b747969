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
 * otherwise. Where the key has none of the values, {@code ck} is false or null, so Spark's
 * {@code AND} yields false or null: no match, the same as skipping, provided Spark would not
 * have thrown while finding that out. What Spark evaluates (its {@code And.eval}): the left
 * side, then the right side unless the left is false. So the conjuncts before {@code ck}
 * are always evaluated, and must be kinds that cannot throw ({@link NodeFacts}). Where
 * {@code ck} is false, Spark stops there; where it is NULL (an absent tag, a NULL in the
 * {@code IN} list, a field an event may lack), Spark goes on to the conjuncts after it, so
 * those must not be able to throw either.
 */
final class IndexChoice implements Serializable {
  private static final long serialVersionUID = 1L;

  final IndexKey key;
  /** The values that can match, in the order written; empty: the rule can never match. */
  final Set<UTF8String> values;
  /** Whether the conjunct can be NULL (not only false) for an event it does not match. */
  final boolean nullWhenUnmatched;

  private IndexChoice(IndexKey key, Set<UTF8String> values, boolean nullWhenUnmatched) {
    this.key = key;
    this.values = values;
    this.nullWhenUnmatched = nullWhenUnmatched;
  }

  /**
   * The best conjunct of {@code rule} to index it by, or null (a residual rule, evaluated for
   * every event). {@code preference} ranks field names (first is best); a map entry ranks after
   * them; between equal ranks, fewer values win. {@code present}: the fields every evaluated
   * event has (never null).
   */
  static IndexChoice choose(Expression rule, String[] fieldNames, List<String> preference,
      Set<String> present) {
    List<Expression> conjuncts = conjuncts(rule);
    int n = conjuncts.size();
    // safeFrom[k]: no conjunct from k on can throw.
    boolean[] safeFrom = new boolean[n + 1];
    safeFrom[n] = true;
    for (int k = n - 1; k >= 0; k--) {
      safeFrom[k] = safeFrom[k + 1] && NodeFacts.cannotRaise(conjuncts.get(k));
    }
    IndexChoice best = null;
    for (int k = 0; k < n; k++) {
      Expression conjunct = conjuncts.get(k);
      IndexChoice choice = of(conjunct, fieldNames, present);
      boolean sound = choice != null && (!choice.nullWhenUnmatched || safeFrom[k + 1]);
      if (sound && (best == null || better(choice, best, preference))) {
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

  /** The key and values {@code c} requires, or null if it is not an equality of that shape.
   * {@code present}: the fields every evaluated event has. */
  static IndexChoice of(Expression c, String[] fieldNames, Set<String> present) {
    if (c instanceof EqualTo || c instanceof EqualNullSafe) {
      Expression l = c.children().apply(0);
      Expression r = c.children().apply(1);
      IndexChoice one = equality(l, r, fieldNames);
      if (one == null) {
        one = equality(r, l, fieldNames);
      }
      // "<=>" is never null; "=" is null where the key is.
      return one == null || c instanceof EqualNullSafe ? one
          : new IndexChoice(one.key, one.values, mayBeNull(one.key, present));
    }
    if (c instanceof In) {
      In in = (In) c;
      IndexKey key = IndexKey.of(in.value(), fieldNames);
      if (key == null) {
        return null;
      }
      Set<UTF8String> values = new LinkedHashSet<>();
      boolean nullItem = false;
      for (Expression item : CollectionConverters.asJava(in.list())) {
        if (!(item instanceof Literal)) {
          return null;
        }
        Object v = ((Literal) item).value();
        if (v instanceof UTF8String) {
          values.add(((UTF8String) v).clone());
        } else if (v != null) {
          return null;
        } else {
          nullItem = true;  // "x IN ('a', NULL)" is NULL, not false, where x is not 'a'
        }
      }
      return new IndexChoice(key, values, nullItem || mayBeNull(key, present));
    }
    if (c instanceof InSet) {
      InSet in = (InSet) c;
      IndexKey key = IndexKey.of(in.child(), fieldNames);
      if (key == null) {
        return null;
      }
      Set<UTF8String> values = new LinkedHashSet<>();
      boolean nullItem = false;
      for (Object v : CollectionConverters.asJava(in.hset())) {
        if (v instanceof UTF8String) {
          values.add(((UTF8String) v).clone());
        } else if (v != null) {
          return null;
        } else {
          nullItem = true;
        }
      }
      return new IndexChoice(key, values, nullItem || mayBeNull(key, present));
    }
    if (c instanceof Or) {
      IndexChoice a = of(((Or) c).left(), fieldNames, present);
      IndexChoice b = of(((Or) c).right(), fieldNames, present);
      if (a == null || b == null || !a.key.equals(b.key)) {
        return null;
      }
      Set<UTF8String> values = new LinkedHashSet<>(a.values);
      values.addAll(b.values);
      return new IndexChoice(a.key, values, a.nullWhenUnmatched || b.nullWhenUnmatched);
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
    return new IndexChoice(key, values, false);  // its nullability is the caller's to say
  }

  /** Whether the key can be NULL for an evaluated event: a map entry can be absent, a field
   * not in {@code present} can be. */
  private static boolean mayBeNull(IndexKey key, Set<String> present) {
    return key.mapKey != null || !present.contains(key.name);
  }
}
