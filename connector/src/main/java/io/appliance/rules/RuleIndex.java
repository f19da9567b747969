package io.appliance.rules;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * Which rules an event can match, found by looking its values up, not by trying every rule.
 *
 * <p>One hash table per {@link IndexKey} maps a value to the rules indexed under it (ascending
 * rule numbers); rules with no indexable conjunct are residual and are candidates for every
 * event. An event's candidates are the union of its values' buckets and the residual rules, in
 * rule order (the order the alert lists matched rules in). Each rule sits in one table only, so
 * the union has no duplicates. The cost per event is one lookup per key in use plus the
 * candidates' evaluation: it follows the rules that can match the event, not the rule count.
 */
final class RuleIndex implements Serializable {
  private static final long serialVersionUID = 1L;
  private static final int[] NONE = new int[0];

  private final Lookup[] lookups;
  private final int[] residual;

  private static final class Lookup implements Serializable {
    private static final long serialVersionUID = 1L;
    final IndexKey key;
    final HashMap<UTF8String, int[]> buckets;

    Lookup(IndexKey key, HashMap<UTF8String, int[]> buckets) {
      this.key = key;
      this.buckets = buckets;
    }
  }

  private RuleIndex(Lookup[] lookups, int[] residual) {
    this.lookups = lookups;
    this.residual = residual;
  }

  static RuleIndex build(CompiledRule[] rules) {
    Map<IndexKey, Map<UTF8String, List<Integer>>> byKey = new LinkedHashMap<>();
    List<Integer> residual = new ArrayList<>();
    for (int i = 0; i < rules.length; i++) {
      IndexChoice choice = rules[i].index;
      if (choice == null) {
        residual.add(i);
        continue;
      }
      Map<UTF8String, List<Integer>> buckets =
          byKey.computeIfAbsent(choice.key, k -> new HashMap<>());
      for (UTF8String value : choice.values) {
        buckets.computeIfAbsent(value, v -> new ArrayList<>()).add(i);
      }
    }
    Lookup[] lookups = new Lookup[byKey.size()];
    int n = 0;
    for (Map.Entry<IndexKey, Map<UTF8String, List<Integer>>> e : byKey.entrySet()) {
      HashMap<UTF8String, int[]> buckets = new HashMap<>();
      for (Map.Entry<UTF8String, List<Integer>> b : e.getValue().entrySet()) {
        buckets.put(b.getKey(), ints(b.getValue()));
      }
      lookups[n++] = new Lookup(e.getKey(), buckets);
    }
    return new RuleIndex(lookups, ints(residual));
  }

  private static int[] ints(List<Integer> list) {
    int[] out = new int[list.size()];
    for (int i = 0; i < out.length; i++) {
      out[i] = list.get(i);
    }
    return out;
  }

  /** The most candidates an event can have: every bucket's largest plus the residual. */
  int maxCandidates() {
    int most = residual.length;
    for (Lookup l : lookups) {
      int largest = 0;
      for (int[] bucket : l.buckets.values()) {
        largest = Math.max(largest, bucket.length);
      }
      most += largest;
    }
    return most;
  }

  int residualCount() {
    return residual.length;
  }

  /** The keys in use, as rules name them. */
  List<String> keys() {
    List<String> out = new ArrayList<>();
    for (Lookup l : lookups) {
      out.add(l.key.name);
    }
    return out;
  }

  /**
   * Writes the event's candidate rules, ascending, into {@code out} (sized by
   * {@link #maxCandidates}); returns how many, or -1 when the candidates are exactly the array
   * left in {@link #single} (no copy was needed).
   */
  int candidates(InternalRow event, int[] out, int[][] single) {
    int[] only = residual.length > 0 ? residual : null;
    int sources = residual.length > 0 ? 1 : 0;
    int n = 0;
    for (Lookup l : lookups) {
      UTF8String value = l.key.read(event);
      int[] bucket = value == null ? null : l.buckets.get(value);
      if (bucket == null) {
        continue;
      }
      if (sources == 0) {
        only = bucket;
        sources = 1;
        continue;
      }
      if (sources == 1) {
        System.arraycopy(only, 0, out, 0, only.length);
        n = only.length;
      }
      System.arraycopy(bucket, 0, out, n, bucket.length);
      n += bucket.length;
      sources++;
    }
    if (sources <= 1) {
      single[0] = only == null ? NONE : only;
      return -1;
    }
    Arrays.sort(out, 0, n);
    return n;
  }
}
