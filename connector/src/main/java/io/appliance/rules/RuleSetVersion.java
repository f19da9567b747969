package io.appliance.rules;

import java.io.Serializable;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.util.GenericArrayData;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * One published version of a query's rules: the compiled rules, their index, and counts of
 * what they did since it was published.
 *
 * <p>Immutable but for the counts, so the tasks of one JVM share it ({@link TaskRules} is a
 * task's view). It travels to executors in other JVMs serialized; the counts do not travel with
 * it (each JVM counts its own, and executors report theirs to the driver).
 */
public final class RuleSetVersion implements Serializable {
  private static final long serialVersionUID = 1L;

  /** The rules file's content hash (the alert's {@code rules_version}). */
  final String version;
  /** Its number in its book: versions with the same content published twice differ here. */
  final long seq;
  final CompiledRule[] rules;
  final RuleIndex index;
  final int maxCandidates;
  private final String[] fieldNames;

  private transient volatile Counts counts;
  private transient volatile InternalRow noMatch;
  private transient volatile UTF8String versionUtf8;

  RuleSetVersion(String version, long seq, CompiledRule[] rules, String[] fieldNames) {
    this.version = version;
    this.seq = seq;
    this.rules = rules;
    this.fieldNames = fieldNames;
    this.index = RuleIndex.build(rules);
    this.maxCandidates = index.maxCandidates();
  }

  /** The same rules under another sequence number (a book's own copy of a compiled set). */
  RuleSetVersion numbered(long newSeq) {
    return new RuleSetVersion(version, newSeq, rules, fieldNames);
  }

  /** These rules followed by {@code more}'s (the warm-up's own rule after the query's), under
   * this version's name. */
  public RuleSetVersion plus(RuleSetVersion more) {
    CompiledRule[] all = java.util.Arrays.copyOf(rules, rules.length + more.rules.length);
    System.arraycopy(more.rules, 0, all, rules.length, more.rules.length);
    return new RuleSetVersion(version, seq, all, fieldNames);
  }

  /**
   * Per-rule counts: how often each rule was evaluated and matched, and the events. One
   * writer per instance where a task owns it ({@link TaskRules}: plain stores, made visible
   * to readers in order by {@code lazySet}); added to where it gathers others' counts.
   */
  static final class Counts {
    final AtomicLongArray evaluated;
    final AtomicLongArray matched;
    final AtomicLong events = new AtomicLong();

    Counts(int rules) {
      evaluated = new AtomicLongArray(rules);
      matched = new AtomicLongArray(rules);
    }

    void add(long[] evaluatedDelta, long[] matchedDelta, long eventsDelta) {
      for (int i = 0; i < evaluatedDelta.length; i++) {
        if (evaluatedDelta[i] != 0) {
          evaluated.addAndGet(i, evaluatedDelta[i]);
        }
        if (matchedDelta[i] != 0) {
          matched.addAndGet(i, matchedDelta[i]);
        }
      }
      events.addAndGet(eventsDelta);
    }

    void add(Counts other) {
      for (int i = 0; i < evaluated.length(); i++) {
        long e = other.evaluated.get(i);
        if (e != 0) {
          evaluated.addAndGet(i, e);
          matched.addAndGet(i, other.matched.get(i));
        }
      }
      events.addAndGet(other.events.get());
    }
  }

  /** A copy of counts at one moment. */
  static final class Snapshot {
    final long[] evaluated;
    final long[] matched;
    final long events;

    Snapshot(long[] evaluated, long[] matched, long events) {
      this.evaluated = evaluated;
      this.matched = matched;
      this.events = events;
    }
  }

  /** Counts of tasks that stopped using this version, and executors' reports. */
  Counts folded() {
    Counts c = counts;
    if (c == null) {
      synchronized (this) {
        c = counts;
        if (c == null) {
          c = counts = new Counts(rules.length);
        }
      }
    }
    return c;
  }

  private transient volatile java.util.Set<Counts> running;

  private java.util.Set<Counts> running() {
    java.util.Set<Counts> r = running;
    if (r == null) {
      synchronized (this) {
        r = running;
        if (r == null) {
          r = running = java.util.concurrent.ConcurrentHashMap.newKeySet();
        }
      }
    }
    return r;
  }

  /** Counts for a task that starts using this version; read live by {@link #snapshot}. */
  Counts taskCounts() {
    Counts c = new Counts(rules.length);
    running().add(c);
    return c;
  }

  /** A task stopped using this version: its counts join the folded ones. */
  void retire(Counts task) {
    if (running().remove(task)) {
      folded().add(task);
    }
  }

  /** Every count in this JVM now: folded, and the running tasks' so far. */
  Snapshot snapshot() {
    int n = rules.length;
    long[] evaluated = new long[n];
    long[] matched = new long[n];
    Counts f = folded();
    long events = f.events.get();
    for (int i = 0; i < n; i++) {
      evaluated[i] = f.evaluated.get(i);
      matched[i] = f.matched.get(i);
    }
    for (Counts t : running()) {
      events += t.events.get();
      for (int i = 0; i < n; i++) {
        evaluated[i] += t.evaluated.get(i);
        matched[i] += t.matched.get(i);
      }
    }
    return new Snapshot(evaluated, matched, events);
  }

  UTF8String versionUtf8() {
    UTF8String v = versionUtf8;
    if (v == null) {
      v = versionUtf8 = UTF8String.fromString(version);
    }
    return v;
  }

  /** {@code struct<version, rules: []>}: the result for an event that matched nothing. */
  InternalRow noMatch() {
    InternalRow r = noMatch;
    if (r == null) {
      r = noMatch = result(new Object[0]);
    }
    return r;
  }

  InternalRow result(Object[] listed) {
    return new GenericInternalRow(new Object[] {versionUtf8(), new GenericArrayData(listed)});
  }

  String[] fieldNames() {
    return fieldNames;
  }

  public String version() {
    return version;
  }

  public int size() {
    return rules.length;
  }

  public int residualCount() {
    return index.residualCount();
  }

  /** How the rules are indexed, for the appliance's log: keys, residual count, widest event,
   * rules with a threshold checked before their evaluation. */
  public String describeIndex() {
    int thresholded = 0;
    for (CompiledRule r : rules) {
      thresholded += r.thresholds.length > 0 ? 1 : 0;
    }
    return "keys=" + index.keys() + " residual=" + index.residualCount()
        + " max_candidates=" + maxCandidates + " with_threshold=" + thresholded;
  }

  /** Each rule's thresholds ({@link Threshold}), one line per rule in rule order, the
   * thresholds joined by " AND " (an empty line: none). */
  public String describeThresholds() {
    StringBuilder out = new StringBuilder();
    for (CompiledRule r : rules) {
      for (int i = 0; i < r.thresholds.length; i++) {
        out.append(i == 0 ? "" : " AND ").append(r.thresholds[i]);
      }
      out.append('\n');
    }
    return out.toString();
  }
}
