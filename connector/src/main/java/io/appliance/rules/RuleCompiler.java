package io.appliance.rules;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicInteger;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.expressions.Alias;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.AttributeReference;
import org.apache.spark.sql.catalyst.expressions.BoundReference;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.NamedExpression;
import org.apache.spark.sql.catalyst.expressions.SubqueryExpression;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.Project;
import org.apache.spark.sql.classic.Dataset;
import org.apache.spark.sql.classic.ExpressionUtils;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.types.BooleanType;
import org.apache.spark.sql.types.StructType;
import scala.Function1;
import scala.jdk.javaapi.CollectionConverters;
import scala.runtime.AbstractPartialFunction;

/**
 * Turns a rules file's {@code when} expressions into {@link CompiledRule}s with the driver's
 * Spark session, so they mean exactly what Spark SQL says (types, coercions, null handling,
 * functions, the session's ANSI setting), without compiling one plan per rule.
 *
 * <p>Why projections of many rules: resolving each rule on its own cost a Dataset, an analysis
 * and (from Python) py4j round trips per rule, about 30 ms each (1,000 rules took 31 s). Here
 * the rules are parsed, then analyzed and optimized as the columns of projections over an
 * empty relation of the event schema, {@link #CHUNK} rules each, the chunks' analyses and
 * optimizations side by side on the driver's cores. When a chunk's analysis fails, its rules
 * are split in halves and each half analyzed again, down to the single rules at fault, so
 * every broken rule is named with Spark's own message, at a cost of a few analyses per broken
 * rule.
 *
 * <p>The optimized expressions are bound to the event row's field positions: what a task
 * evaluates is what Spark's optimizer made of the rule, evaluated by Spark's own interpreted
 * {@code eval} (the same semantics its generated code has).
 */
public final class RuleCompiler {
  private RuleCompiler() {}

  private static final ObjectMapper JSON = new ObjectMapper();
  /**
   * The kinds of expression that read the clock (continuous mode refuses them; so do rules),
   * by class: a rule's text may hold their names in string literals ({@code metric =
   * 'now()'}) without calling them. {@code unix_timestamp()} without arguments is the current
   * time: an {@code UnixTimestamp} of {@code CurrentTimestamp}.
   */
  private static final Set<String> CLOCK = Set.of("CurrentTimestamp", "Now", "CurrentDate",
      "CurrentTime", "LocalTimestamp", "CurrentTimeZone");

  /** The outcome of {@link #compile}: a version ready to publish, or the problems. */
  public static final class Compiled {
    private final RuleSetVersion version;
    private final List<RuleProblem> problems;
    private final long parseMs;
    private final long analyzeMs;
    private final long optimizeMs;
    private final int analyses;

    Compiled(RuleSetVersion version, List<RuleProblem> problems, long parseMs, long analyzeMs,
        long optimizeMs, int analyses) {
      this.version = version;
      this.problems = problems;
      this.parseMs = parseMs;
      this.analyzeMs = analyzeMs;
      this.optimizeMs = optimizeMs;
      this.analyses = analyses;
    }

    /** Null when there are problems. */
    public RuleSetVersion version() {
      return version;
    }

    /** {@code [[rule index, reason], ...]}, in rule order. */
    public String problemsJson() {
      ArrayNode out = JSON.createArrayNode();
      for (RuleProblem p : problems) {
        out.addArray().add(p.index).add(p.reason);
      }
      return out.toString();
    }

    /** Where the time went, for the appliance's log. */
    public String timingsJson() {
      ObjectNode out = JSON.createObjectNode();
      out.put("parse_ms", parseMs).put("analyze_ms", analyzeMs).put("optimize_ms", optimizeMs)
          .put("analyses", analyses);
      return out.toString();
    }
  }

  /**
   * Compiles the rules in {@code rulesJson} ({@code {"version": hash, "rules": [{"id",
   * "severity", "ordinal", "message", "when"}, ...]}}) against events of {@code eventDdl}.
   * {@code indexPreference}: comma-separated field names, the best index key first;
   * {@code presentFields}: comma-separated names of the fields every evaluated event has
   * (never null: the required ones).
   */
  public static Compiled compile(SparkSession spark, String eventDdl, String indexPreference,
      String presentFields, String rulesJson) {
    JsonNode doc;
    try {
      doc = JSON.readTree(rulesJson);
    } catch (java.io.IOException e) {
      throw new IllegalArgumentException("rules JSON: " + e.getMessage(), e);
    }
    String version = doc.get("version").asText();
    List<RuleDefinition> defs = new ArrayList<>();
    for (JsonNode r : doc.get("rules")) {
      defs.add(new RuleDefinition(r.get("id").asText(), r.get("severity").asText(),
          r.get("ordinal").asInt(), r.get("message").asText(), r.get("when").asText()));
    }
    StructType schema = StructType.fromDDL(eventDdl);
    List<String> preference = names(indexPreference);
    Set<String> present = new HashSet<>(names(presentFields));

    // Expressions take settings (ANSI evaluation, ...) from the thread's active session when
    // they are built, and the parser builds them: the rules' session must be the active one.
    scala.Option<SparkSession> before = SparkSession.getActiveSession();
    SparkSession session = analysisSession(spark);
    SparkSession.setActiveSession(session);
    try {
      return compile(session, defs, version, schema, preference, present);
    } finally {
      if (before.isDefined()) {
        SparkSession.setActiveSession(before.get());
      } else {
        SparkSession.clearActiveSession();
      }
    }
  }

  private static List<String> names(String commaSeparated) {
    return commaSeparated.isEmpty() ? List.of() : Arrays.asList(commaSeparated.split(","));
  }

  private static Compiled compile(SparkSession session, List<RuleDefinition> defs,
      String version, StructType schema, List<String> preference, Set<String> present) {
    Dataset<Row> events = session.createDataFrame(Collections.<Row>emptyList(), schema);
    Expression[] parsed = new Expression[defs.size()];  // each chunk fills its own range
    List<Chunk> chunks = new ArrayList<>();
    for (int from = 0; from < defs.size(); from += CHUNK) {
      chunks.add(new Chunk(session, events, defs, parsed, from,
          Math.min(from + CHUNK, defs.size())));
    }
    ExecutorService pool = pool(session, chunks.size());
    try {
      long t0 = System.nanoTime();
      // Parsed on this thread: parsers side by side were slower (10,000 rules: 13 s against
      // 5.4 s on the same loaded machine).
      for (Chunk c : chunks) {
        c.parse();
      }
      long t1 = System.nanoTime();
      inEach(pool, chunks, Chunk::analyze);
      long t2 = System.nanoTime();
      List<RuleProblem> problems = new ArrayList<>();
      int analyses = 0;
      for (Chunk c : chunks) {
        problems.addAll(c.problems);
        analyses += c.analysis == null ? 0 : c.analysis.count;
      }
      if (!problems.isEmpty()) {
        problems.sort((a, b) -> Integer.compare(a.index, b.index));
        return new Compiled(null, problems, ms(t0, t1), ms(t1, t2), 0, analyses);
      }
      List<Attribute> input = CollectionConverters.asJava(events.queryExecution().analyzed()
          .output());
      CompiledRule[] rules = new CompiledRule[defs.size()];
      inEach(pool, chunks, c -> c.optimizeAndBind(rules, input, schema.fieldNames(),
          preference, present));
      long t3 = System.nanoTime();
      return new Compiled(new RuleSetVersion(version, 0, rules, schema.fieldNames()),
          problems, ms(t0, t1), ms(t1, t2), ms(t2, t3), analyses);
    } finally {
      pool.shutdownNow();
    }
  }

  /**
   * Rules per projection. Why not one projection of all rules: Spark's analysis and
   * optimization of a projection grow faster than its columns (10,000 rules in one: 6.5 s
   * from a cold JVM; in projections of 500: 4.3 s, one thread), and chunks can go to the
   * driver's cores side by side. A rule's analysis does not depend on the other columns of
   * its projection, so the verdicts are the same.
   */
  static final int CHUNK = 500;

  /** Threads for the chunks: the driver's cores, at most one per chunk; each thread has the
   * rules' session active (expressions take their settings from it when built). */
  private static ExecutorService pool(SparkSession session, int chunks) {
    int threads = Math.max(1, Math.min(chunks, Runtime.getRuntime().availableProcessors()));
    AtomicInteger n = new AtomicInteger();
    return Executors.newFixedThreadPool(threads, r -> {
      Thread t = new Thread(() -> {
        SparkSession.setActiveSession(session);
        r.run();
      }, "rule-compiler-" + n.incrementAndGet());
      t.setDaemon(true);
      return t;
    });
  }

  /** {@code step} on every chunk, on the pool; returns when all are done, rethrowing the
   * first failure as it was thrown. */
  private static void inEach(ExecutorService pool, List<Chunk> chunks,
      java.util.function.Consumer<Chunk> step) {
    List<Future<?>> running = new ArrayList<>();
    for (Chunk c : chunks) {
      running.add(pool.submit(() -> step.accept(c)));
    }
    try {
      for (Future<?> f : running) {
        f.get();
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("rule compilation interrupted", e);
    } catch (ExecutionException e) {
      Throwable cause = e.getCause();
      if (cause instanceof RuntimeException) {
        throw (RuntimeException) cause;
      }
      if (cause instanceof Error) {
        throw (Error) cause;
      }
      throw new IllegalStateException(cause);
    }
  }

  /** The rules {@code from} to {@code to} (exclusive) of the file: parsed, analyzed as one
   * projection (halved down to the rules at fault), optimized and bound. */
  private static final class Chunk {
    final SparkSession session;
    final Dataset<Row> events;
    final List<RuleDefinition> defs;
    final int from;
    final int to;
    final Expression[] parsed;
    final List<Integer> parsedOk = new ArrayList<>();
    final List<RuleProblem> problems = new ArrayList<>();
    Analysis analysis;

    Chunk(SparkSession session, Dataset<Row> events, List<RuleDefinition> defs,
        Expression[] parsed, int from, int to) {
      this.session = session;
      this.events = events;
      this.defs = defs;
      this.parsed = parsed;
      this.from = from;
      this.to = to;
    }

    void parse() {
      for (int i = from; i < to; i++) {
        try {
          parsed[i] = session.sessionState().sqlParser().parseExpression(defs.get(i).when);
          parsedOk.add(i);
        } catch (Exception e) {  // ParseException, declared by the parser
          problems.add(new RuleProblem(i, firstLine(e.getMessage())));
        }
      }
    }

    void analyze() {
      analysis = new Analysis(events, parsed, to - from);
      problems.addAll(analysis.check(parsedOk));
    }

    void optimizeAndBind(CompiledRule[] rules, List<Attribute> input, String[] fieldNames,
        List<String> preference, Set<String> present) {
      LogicalPlan optimized = analysis.all.queryExecution().optimizedPlan();
      if (!(optimized instanceof Project)) {
        throw new IllegalStateException("the rules' optimized plan is a "
            + optimized.getClass().getSimpleName() + ", not a projection");
      }
      List<NamedExpression> columns =
          CollectionConverters.asJava(((Project) optimized).projectList());
      for (int i = from; i < to; i++) {
        Expression bound = bind(((Alias) columns.get(i - from)).child(), input);
        rules[i] = new CompiledRule(defs.get(i), bound,
            IndexChoice.choose(bound, fieldNames, preference, present),
            Threshold.of(bound, fieldNames));
      }
    }
  }

  /**
   * A copy of {@code spark}'s session (same SQL settings) whose optimizer keeps the rules: over
   * an empty relation, Spark would fold the whole projection into an empty result, which is
   * right for a query and useless here. The two rules that fold it only remove work that an
   * empty input does not need; they never change what an expression means.
   */
  private static SparkSession analysisSession(SparkSession spark) {
    SparkSession copy = spark.cloneSession();
    String excluded = copy.conf().get(EXCLUDED_RULES, "");
    copy.conf().set(EXCLUDED_RULES, (excluded.isEmpty() ? "" : excluded + ",") + KEEP_PROJECTION);
    return copy;
  }

  private static final String EXCLUDED_RULES = "spark.sql.optimizer.excludedRules";
  private static final String KEEP_PROJECTION =
      "org.apache.spark.sql.catalyst.optimizer.ConvertToLocalRelation,"
      + "org.apache.spark.sql.catalyst.optimizer.PropagateEmptyRelation";

  private static long ms(long from, long to) {
    return (to - from) / 1_000_000;
  }

  /** Spark's message as one line: its first line, without the SQLSTATE suffix. */
  static String firstLine(String message) {
    if (message == null) {
      return "rejected by Spark";
    }
    for (String line : message.split("\n")) {
      if (!line.isBlank()) {
        String one = String.join(" ", line.trim().split("\\s+"));
        int state = one.indexOf(" SQLSTATE:");
        return state >= 0 ? one.substring(0, state) : one;
      }
    }
    return "rejected by Spark";
  }

  /** Analysis of subsets of the parsed rules, halving a subset that fails. */
  private static final class Analysis {
    final Dataset<Row> events;
    final Expression[] parsed;
    /** The rules it analyzes, parsed or not. */
    final int size;
    int count;
    /** The last analysis that covered every rule without a problem. */
    Dataset<Row> all;

    Analysis(Dataset<Row> events, Expression[] parsed, int size) {
      this.events = events;
      this.parsed = parsed;
      this.size = size;
    }

    List<RuleProblem> check(List<Integer> indices) {
      List<RuleProblem> problems = new ArrayList<>();
      if (indices.isEmpty()) {
        return problems;
      }
      Dataset<Row> out;
      String failure = null;
      try {
        count++;
        out = select(indices);
      } catch (Exception e) {  // AnalysisException (a checked exception to Java), or any
        out = null;
        failure = firstLine(e.getMessage());
      }
      if (out != null) {
        LogicalPlan plan = out.queryExecution().analyzed();
        if (!(plan instanceof Project) || !((Project) plan).child().children().isEmpty()) {
          failure = "aggregate and window functions are not allowed";
        } else {
          List<NamedExpression> columns =
              CollectionConverters.asJava(((Project) plan).projectList());
          for (int k = 0; k < columns.size(); k++) {
            String problem = columnProblem(((Alias) columns.get(k)).child());
            if (problem != null) {
              problems.add(new RuleProblem(indices.get(k), problem));
            }
          }
          if (problems.isEmpty() && indices.size() == size) {
            all = out;
          }
          return problems;
        }
      }
      if (indices.size() == 1) {
        problems.add(new RuleProblem(indices.get(0), failure));
        return problems;
      }
      int half = indices.size() / 2;
      problems.addAll(check(indices.subList(0, half)));
      problems.addAll(check(indices.subList(half, indices.size())));
      return problems;
    }

    private Dataset<Row> select(List<Integer> indices) {
      Column[] columns = new Column[indices.size()];
      for (int k = 0; k < columns.length; k++) {
        int i = indices.get(k);
        columns[k] = ExpressionUtils.column(parsed[i]).as("r" + i);
      }
      return events.select(columns);
    }
  }

  /** What the appliance refuses in an analyzed rule; null if it may run. */
  private static String columnProblem(Expression e) {
    if (SubqueryExpression.hasSubquery(e)) {
      return "subqueries are not allowed";
    }
    if (readsClock(e)) {
      return "current-time functions are not allowed";
    }
    if (!e.deterministic()) {
      return "must be deterministic";
    }
    if (!(e.dataType() instanceof BooleanType)) {
      return "must be a boolean expression (it is " + e.dataType().simpleString() + ")";
    }
    return NeverMatch.problem(e);
  }

  private static boolean readsClock(Expression e) {
    if (CLOCK.contains(e.getClass().getSimpleName())) {
      return true;
    }
    for (Expression child : CollectionConverters.asJava(e.children())) {
      if (readsClock(child)) {
        return true;
      }
    }
    return false;
  }

  /** {@code e} with each event column replaced by the row position it reads. */
  private static Expression bind(Expression e, List<Attribute> input) {
    return e.transform(new AbstractPartialFunction<Expression, Expression>() {
      @Override
      public boolean isDefinedAt(Expression x) {
        return x instanceof AttributeReference;
      }

      @Override
      public <A1 extends Expression, B1> B1 applyOrElse(A1 x, Function1<A1, B1> otherwise) {
        if (!(x instanceof AttributeReference)) {
          return otherwise.apply(x);
        }
        AttributeReference a = (AttributeReference) x;
        for (int i = 0; i < input.size(); i++) {
          if (input.get(i).exprId().equals(a.exprId())) {
            @SuppressWarnings("unchecked")
            B1 out = (B1) new BoundReference(i, a.dataType(), a.nullable());
            return out;
          }
        }
        throw new IllegalStateException("rule column " + a.name() + " is not an event field");
      }
    });
  }
}
