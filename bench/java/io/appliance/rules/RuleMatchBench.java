package io.appliance.rules;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.util.ArrayBasedMapData;
import org.apache.spark.sql.catalyst.util.GenericArrayData;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * The rule book's cost per event, alone: one {@link TaskRules} (what a task evaluates with)
 * over one compiled rules file, fed the load driver's events in a loop on one thread, with
 * no Kafka, JSON or Spark task around it. In package {@code io.appliance.rules} to reach
 * the task's evaluator, which the connector keeps package-private.
 *
 * <p>Arguments: the rules JSON (as {@code appliance.rules.rule_book} hands the compiler),
 * a file of {@code key=value} lines (the appliance's SQL settings, and the compiler's
 * inputs the Python side owns: {@code @ddl}, the event schema; {@code @preference}, the
 * index keys; {@code @present}, the required fields), seconds per round, rounds.
 * Prints one JSON line: the rules, the candidates per event, and each round's nanoseconds
 * per event (the first rounds are the JIT's; the caller takes the later ones' median).
 */
public final class RuleMatchBench {
  public static void main(String[] args) throws Exception {
    String rulesJson = new String(Files.readAllBytes(Paths.get(args[0])), StandardCharsets.UTF_8);
    List<String> settings = Files.readAllLines(Paths.get(args[1]), StandardCharsets.UTF_8);
    double seconds = Double.parseDouble(args[2]);
    int rounds = Integer.parseInt(args[3]);

    SparkSession.Builder builder = SparkSession.builder().master("local[1]")
        .appName("rule-match-bench").config("spark.ui.enabled", "false");
    SparkSession spark = builder.getOrCreate();
    java.util.Map<String, String> facts = new java.util.HashMap<>();
    for (String line : settings) {
      int eq = line.indexOf('=');
      if (eq > 0 && line.startsWith("@")) {
        facts.put(line.substring(1, eq), line.substring(eq + 1));
      } else if (eq > 0) {
        try {
          spark.conf().set(line.substring(0, eq), line.substring(eq + 1));
        } catch (RuntimeException staticConf) {
          // a static setting only a new context takes: this JVM keeps its own
        }
      }
    }
    RuleCompiler.Compiled compiled = RuleCompiler.compile(spark, facts.get("ddl"),
        facts.get("preference"), facts.get("present"), rulesJson);
    RuleSetVersion version = compiled.version();
    if (version == null) {
      throw new IllegalArgumentException("rules refused: " + compiled.problemsJson());
    }
    InternalRow[] events = events(1024);
    TaskRules rules = new TaskRules(version);
    int[] buffer = new int[Math.max(version.maxCandidates, 1)];
    int[][] single = new int[1][];
    long candidates = 0;
    for (InternalRow e : events) {
      int n = version.index.candidates(e, buffer, single);
      candidates += n < 0 ? single[0].length : n;
    }
    double[] nsPerEvent = new double[rounds];
    long sink = 0;
    for (int r = 0; r < rounds; r++) {
      long deadline = System.nanoTime() + (long) (seconds * 1e9);
      long count = 0;
      long start = System.nanoTime();
      long now = start;
      while (now < deadline) {
        for (InternalRow e : events) {
          sink += rules.match(e).numFields();
        }
        count += events.length;
        now = System.nanoTime();
      }
      nsPerEvent[r] = (now - start) / (double) count;
    }
    StringBuilder out = new StringBuilder("{\"rules\": ").append(version.size())
        .append(", \"candidates_per_event\": ").append(candidates / (double) events.length)
        .append(", \"index\": \"").append(version.describeIndex()).append("\"")
        .append(", \"ns_per_event\": ").append(Arrays.toString(nsPerEvent))
        .append(", \"sink\": ").append(sink).append("}");
    System.out.println(out);
    spark.stop();
  }

  /** The load driver's events (``AlertLatencyBench``): metric cpu.util from 64 sources,
   * values 0-89, one in 100 at 97.5 (the alerting one), tags {dc: b}. */
  private static InternalRow[] events(int n) {
    List<InternalRow> out = new ArrayList<>();
    ArrayBasedMapData tags = new ArrayBasedMapData(
        new GenericArrayData(new Object[] {UTF8String.fromString("dc")}),
        new GenericArrayData(new Object[] {UTF8String.fromString("b")}));
    for (int i = 0; i < n; i++) {
      out.add(new GenericInternalRow(new Object[] {
          UTF8String.fromString("e-" + i), 1.7e12 + i, UTF8String.fromString("bench-" + (i % 64)),
          UTF8String.fromString("cpu.util"), i % 100 == 0 ? 97.5 : (double) (i % 90), tags}));
    }
    return out.toArray(new InternalRow[0]);
  }
}
