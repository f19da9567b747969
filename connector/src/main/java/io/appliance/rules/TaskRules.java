package io.appliance.rules;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Expression;

/**
 * One task's evaluator over one {@link RuleSetVersion}: the index's candidates for an event,
 * each evaluated with Spark's interpreted {@code eval}, the matched ones listed in rule order.
 *
 * <p>Used by one task thread only. Rules whose expressions keep state get a copy of their own
 * here on first use ({@link CompiledRule#shared}); counts are kept in plain arrays and added to
 * the version's shared counts every {@link #FLUSH_EVENTS} events and when the task moves to
 * another version or ends.
 */
final class TaskRules {
  static final int FLUSH_EVENTS = 4096;

  final RuleSetVersion set;
  private final Expression[] own;
  private final int[] buffer;
  private final int[][] single = new int[1][];
  private final Object[] listed;
  private final long[] evaluated;
  private final long[] matched;
  private long events;

  TaskRules(RuleSetVersion set) {
    this.set = set;
    int n = set.rules.length;
    this.own = new Expression[n];
    this.buffer = new int[Math.max(set.maxCandidates, 1)];
    this.listed = new Object[Math.max(set.maxCandidates, 1)];
    this.evaluated = new long[n];
    this.matched = new long[n];
  }

  InternalRow match(InternalRow event) {
    int n = set.index.candidates(event, buffer, single);
    int[] candidates = buffer;
    if (n < 0) {
      candidates = single[0];
      n = candidates.length;
    }
    int hits = 0;
    CompiledRule[] rules = set.rules;
    for (int k = 0; k < n; k++) {
      int i = candidates[k];
      CompiledRule rule = rules[i];
      evaluated[i]++;
      Object verdict;
      try {
        verdict = expression(i, rule).eval(event);
      } catch (RuntimeException e) {
        flush();
        throw new RuleFailedException(rule.definition.id, e);
      }
      if (Boolean.TRUE.equals(verdict)) {
        matched[i]++;
        listed[hits++] = rule.listed;
      }
    }
    if (++events >= FLUSH_EVENTS) {
      flush();
    }
    if (hits == 0) {
      return set.noMatch();
    }
    Object[] out = new Object[hits];
    System.arraycopy(listed, 0, out, 0, hits);
    return set.result(out);
  }

  private Expression expression(int i, CompiledRule rule) {
    if (rule.shared) {
      return rule.when;
    }
    Expression e = own[i];
    if (e == null) {
      e = own[i] = (Expression) rule.when.clone();
    }
    return e;
  }

  /** Adds this task's counts to the version's and starts again from zero. */
  void flush() {
    if (events == 0) {
      return;
    }
    set.counts().add(evaluated, matched, events);
    java.util.Arrays.fill(evaluated, 0);
    java.util.Arrays.fill(matched, 0);
    events = 0;
  }
}
