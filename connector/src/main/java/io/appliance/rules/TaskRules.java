package io.appliance.rules;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Expression;

/**
 * One task's evaluator over one {@link RuleSetVersion}: the index's candidates for an event,
 * each evaluated with Spark's interpreted {@code eval} unless one of its {@link Threshold}s
 * already fails (a candidate either way: counted as evaluated), the matched ones listed in
 * rule order.
 *
 * <p>Used by one task thread only. Rules whose expressions may keep state get a copy of their
 * own here on first use, read back from the rule's serialized form ({@link
 * CompiledRule#taskCopy}): nothing in it is reachable from another task. The task's counts are its own (one writer,
 * no atomic read-modify-write on the hot path) and readable at any time by the version's
 * {@link RuleSetVersion#snapshot}, so a continuous task, which never ends, is counted too;
 * {@link #retire} hands them to the version when the task moves on or ends.
 */
final class TaskRules {
  final RuleSetVersion set;
  private final Expression[] own;
  private final int[] buffer;
  private final int[][] single = new int[1][];
  private final Object[] listed;
  private final RuleSetVersion.Counts counts;
  private final java.util.concurrent.atomic.AtomicLongArray evaluated;
  private final java.util.concurrent.atomic.AtomicLongArray matched;

  TaskRules(RuleSetVersion set) {
    this.set = set;
    int n = set.rules.length;
    this.own = new Expression[n];
    this.buffer = new int[Math.max(set.maxCandidates, 1)];
    this.listed = new Object[Math.max(set.maxCandidates, 1)];
    this.counts = set.taskCounts();
    this.evaluated = counts.evaluated;
    this.matched = counts.matched;
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
      evaluated.lazySet(i, evaluated.get(i) + 1);  // one writer: this task
      if (Threshold.anyExcludes(rule.thresholds, event)) {
        continue;  // false in Spark too, found with a comparison instead of eval
      }
      Object verdict;
      try {
        verdict = expression(i, rule).eval(event);
      } catch (RuntimeException e) {
        throw new RuleFailedException(rule.definition.id, e);
      }
      if (Boolean.TRUE.equals(verdict)) {
        matched.lazySet(i, matched.get(i) + 1);
        listed[hits++] = rule.listed;
      }
    }
    counts.events.lazySet(counts.events.get() + 1);
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
      e = own[i] = rule.taskCopy();
    }
    return e;
  }

  /** This task no longer uses the version: its counts join the version's. */
  void retire() {
    set.retire(counts);
  }
}
