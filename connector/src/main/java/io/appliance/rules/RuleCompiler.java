package io.appliance.rules;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

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
 * <p>Why one analysis: resolving each rule on its own cost a Dataset, an analysis and (from
 * Python) py4j round trips per rule, about 30 ms each (1,000 rules took 31 s). Here all rules
 * are parsed, then analyzed and optimized together as the columns of one projection over an
 * empty relation of the event schema, the cost of one query. When that analysis fails, the
 * rules are split in halves and each half analyzed again, down to the single rules at fault,
 * so every broken rule is named with Spark's own message, at a cost of a few analyses per
 * broken rule.
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
    long t0 = System.nanoTime();
    List<RuleProblem> problems = new ArrayList<>();
    Expression[] parsed = new Expression[defs.size()];
    List<Integer> parsedOk = new ArrayList<>();
    for (int i = 0; i < parsed.length; i++) {
      try {
        parsed[i] = session.sessionState().sqlParser().parseExpression(defs.get(i).when);
        parsedOk.add(i);
      } catch (Exception e) {  // ParseException, declared by the parser
        problems.add(new RuleProblem(i, firstLine(e.getMessage())));
      }
    }
    long t1 = System.nanoTime();
    Dataset<Row> events = session.createDataFrame(Collections.<Row>emptyList(), schema);
    Analysis analysis = new Analysis(events, parsed);
    problems.addAll(analysis.check(parsedOk));
    long t2 = System.nanoTime();
    if (!problems.isEmpty()) {
      problems.sort((a, b) -> Integer.compare(a.index, b.index));
      return new Compiled(null, problems, ms(t0, t1), ms(t1, t2), 0, analysis.count);
    }
    CompiledRule[] rules = optimizeAndBind(analysis.all, events, defs, schema.fieldNames(),
        preference, present);
    long t3 = System.nanoTime();
    return new Compiled(new RuleSetVersion(version, 0, rules, schema.fieldNames()),
        problems, ms(t0, t1), ms(t1, t2), ms(t2, t3), analysis.count);
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
    int count;
    /** The last analysis that covered every parsed rule without a problem. */
    Dataset<Row> all;

    Analysis(Dataset<Row> events, Expression[] parsed) {
      this.events = events;
      this.parsed = parsed;
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
          if (problems.isEmpty() && indices.size() == parsed.length) {
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

  private static CompiledRule[] optimizeAndBind(Dataset<Row> all, Dataset<Row> events,
      List<RuleDefinition> defs, String[] fieldNames, List<String> preference,
      Set<String> present) {
    LogicalPlan optimized = all.queryExecution().optimizedPlan();
    if (!(optimized instanceof Project)) {
      throw new IllegalStateException("the rules' optimized plan is a "
          + optimized.getClass().getSimpleName() + ", not a projection");
    }
    List<NamedExpression> columns =
        CollectionConverters.asJava(((Project) optimized).projectList());
    List<Attribute> input = CollectionConverters.asJava(events.queryExecution().analyzed()
        .output());
    CompiledRule[] rules = new CompiledRule[defs.size()];
    for (int i = 0; i < rules.length; i++) {
      Expression bound = bind(((Alias) columns.get(i)).child(), input);
      rules[i] = new CompiledRule(defs.get(i), bound,
          IndexChoice.choose(bound, fieldNames, preference, present));
    }
    return rules;
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
