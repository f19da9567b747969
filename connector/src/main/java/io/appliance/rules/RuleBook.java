package io.appliance.rules;

import java.util.ArrayDeque;
import java.util.Deque;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.appliance.rpc.DriverEndpoint;
import org.apache.spark.rpc.RpcEnv;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.expressions.objects.Invoke;
import org.apache.spark.sql.classic.ExpressionUtils;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.ObjectType;
import org.apache.spark.sql.types.StructType;
import scala.jdk.javaapi.CollectionConverters;

/**
 * The rules a running query evaluates, as data: versions published by the driver while the
 * query runs, each taking effect at an epoch or batch boundary, without a restart.
 *
 * <p>Why: compiling the rules into the plan meant a rules change restarted the query, and
 * alerting waited 1.4-1.6 s per swap; with thousands of rules the generated code and its
 * planning grew with the rule count. The plan now holds one expression that asks the book for
 * the rules ({@link RuleMatcher}); its generated code is the same whatever the rules are.
 *
 * <p>Generations: a task evaluates each event under the version in effect for its
 * <i>generation</i>, the continuous epoch or the micro-batch / real-time batch it belongs to.
 * Every task asks the book for its generation when it enters one, and the book remembers the
 * highest generation asked (its frontier). A version published now takes effect from the
 * generation after the frontier: no task has entered that one yet, so every task of every
 * generation sees one version, and a generation evaluated again (a restarted query replays
 * its uncommitted epoch) sees the version it saw before. Batch queries (no generation) see the
 * newest version.
 *
 * <p>Lineages: one book outlives its queries in a pair's instance (a step down stops the query,
 * a takeover starts another in the same session), and a query started on a fresh checkpoint
 * numbers its epochs or batches from 0 again. Taken as they come, those generations lie below
 * the frontier the last query left: a version published then would take effect only once the
 * new query passed the old one's numbers (the deploy test's new rule never alerted), and
 * generations already asked would answer from the old query's versions. So each fresh query
 * gets a <i>base</i> past every generation the book has seen ({@link #newLineage}), planned
 * into its matchers, which add it to their epoch or batch id: generations only grow, over
 * every query the book serves.
 *
 * <p>Where the book lives: on the driver. Tasks in the driver's JVM (a local master) read it
 * directly; executors in other JVMs ask it over Spark's RPC ({@link RemoteBook}) and report
 * their per-rule counts back.
 */
public final class RuleBook {
  private RuleBook() {}

  /** A task of a batch query: no epoch or batch, the newest version. */
  static final long NEWEST = Long.MAX_VALUE;
  /** Versions a book keeps for replays; older ones' counts are kept as totals by rule id. */
  static final int KEEP = 4;
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final String NAME_PREFIX = "appliance-rules-";
  static final String AT = "at";
  static final String VERSION = "version";
  static final String COUNTS = "counts";
  static final String NEWEST_ASK = "newest";

  /** The books opened in this JVM (the driver's), by id. */
  static final Map<String, Book> LOCAL = new ConcurrentHashMap<>();

  /** What a task evaluates under: the version for a generation, or the newest one. */
  interface Source {
    RuleSetVersion at(long generation);

    /** The newest version (a live switch: real-time batches last minutes). Called per
     * event, so a volatile read. */
    RuleSetVersion newest();

    /** A task took version {@code seq} live (it evaluates events with it from now on). */
    void took(long seq);
  }

  /** One query's versions over generations (driver side). */
  static final class Book implements Source {
    final String id;
    final String[] fieldNames;
    final Endpoint endpoint;
    private final Deque<Entry> entries = new ArrayDeque<>();
    private volatile RuleSetVersion newest;
    /** The newest version a task took live (-1: none). */
    private volatile long tookLive = -1;
    private long frontier = Long.MIN_VALUE;
    /** Added to the current lineage's epoch or batch ids (0: the book's first query). */
    private long base;
    private long nextSeq;
    /** Counts of versions no longer kept, by rule id: {evaluated, matched}. */
    private final Map<String, long[]> retired = new HashMap<>();
    private long retiredEvents;

    Book(String id, String[] fieldNames, RpcEnv env) {
      this.id = id;
      this.fieldNames = fieldNames;
      this.endpoint = env == null ? null : new Endpoint(env, this);
    }

    @Override
    public synchronized RuleSetVersion at(long generation) {
      if (entries.isEmpty()) {
        throw new IllegalStateException("rule book " + id + " has no rules published");
      }
      if (generation != NEWEST && generation > frontier) {
        frontier = generation;
      }
      RuleSetVersion chosen = entries.peekFirst().version;
      for (Entry e : entries) {
        if (e.from <= generation) {
          chosen = e.version;
        }
      }
      return chosen;
    }

    synchronized RuleSetVersion bySeq(long seq) {
      for (Entry e : entries) {
        if (e.version.seq == seq) {
          return e.version;
        }
      }
      return null;
    }

    /** Adds {@code version}; returns the generation it takes effect from. */
    synchronized long publish(RuleSetVersion compiled) {
      RuleSetVersion version = compiled.numbered(nextSeq++);
      long from = frontier == Long.MIN_VALUE ? Long.MIN_VALUE : frontier + 1;
      // Versions published after the frontier and never used are superseded.
      while (!entries.isEmpty() && entries.peekLast().from >= from) {
        retire(entries.pollLast().version);
      }
      entries.addLast(new Entry(from, version));
      while (entries.size() > KEEP) {
        retire(entries.pollFirst().version);
      }
      newest = version;
      return from;
    }

    @Override
    public RuleSetVersion newest() {
      RuleSetVersion v = newest;
      if (v == null) {
        throw new IllegalStateException("rule book " + id + " has no rules published");
      }
      return v;
    }

    @Override
    public void took(long seq) {
      if (seq > tookLive) {
        tookLive = seq;
      }
    }

    synchronized long frontier() {
      return frontier;
    }

    /** A query that numbers its generations from 0 again is planned next: its base, past
     * every generation asked so far (the newest version is in effect from it). */
    synchronized long newLineage() {
      if (frontier != Long.MIN_VALUE && frontier >= base) {
        base = frontier + 1;
      }
      return base;
    }

    synchronized long base() {
      return base;
    }

    /** Whether a task has entered a generation where version {@code seq} is in effect, or
     * took it (or a newer one) live. */
    synchronized boolean reached(long seq) {
      if (tookLive >= seq) {
        return true;
      }
      for (Entry e : entries) {
        if (e.version.seq == seq) {
          return frontier != Long.MIN_VALUE && frontier >= e.from;
        }
      }
      return true;  // superseded by a newer version that took effect
    }

    synchronized RuleSetVersion newestOrNull() {
      return entries.isEmpty() ? null : entries.peekLast().version;
    }

    private void retire(RuleSetVersion v) {
      RuleSetVersion.Snapshot c = v.snapshot();
      for (int i = 0; i < v.rules.length; i++) {
        long[] total = retired.computeIfAbsent(v.rules[i].definition.id, k -> new long[2]);
        total[0] += c.evaluated[i];
        total[1] += c.matched[i];
      }
      retiredEvents += c.events;
    }

    /** Counts an executor reported for version {@code seq}. */
    synchronized void addCounts(long seq, long[] evaluated, long[] matched, long events) {
      RuleSetVersion v = bySeq(seq);
      if (v != null && v.rules.length == evaluated.length) {
        v.folded().add(evaluated, matched, events);
      }
    }

    /** Per-rule counts since the book opened, for the newest version's rules (JSON). */
    synchronized String stats() {
      RuleSetVersion newest = newestOrNull();
      ObjectNode out = JSON.createObjectNode();
      if (newest == null) {
        return out.toString();
      }
      Map<String, long[]> totals = new HashMap<>(retired.size() * 2);
      for (Map.Entry<String, long[]> r : retired.entrySet()) {
        totals.put(r.getKey(), r.getValue().clone());
      }
      long events = retiredEvents;
      for (Entry e : entries) {
        RuleSetVersion.Snapshot c = e.version.snapshot();
        events += c.events;
        for (int i = 0; i < e.version.rules.length; i++) {
          long[] t = totals.computeIfAbsent(e.version.rules[i].definition.id, k -> new long[2]);
          t[0] += c.evaluated[i];
          t[1] += c.matched[i];
        }
      }
      out.put("version", newest.version).put("seq", newest.seq).put("events", events)
          .put("frontier", frontier == Long.MIN_VALUE ? -1 : frontier);
      ArrayNode rules = out.putArray("rules");
      for (CompiledRule r : newest.rules) {
        long[] t = totals.getOrDefault(r.definition.id, new long[2]);
        ArrayNode row = rules.addArray().add(r.definition.id).add(t[0]).add(t[1]);
        if (r.index == null) {
          row.addNull();
        } else {
          row.add(r.index.key.name);
        }
      }
      return out.toString();
    }

    void close() {
      if (endpoint != null) {
        endpoint.close();
      }
    }
  }

  private static final class Entry {
    final long from;
    final RuleSetVersion version;

    Entry(long from, RuleSetVersion version) {
      this.from = from;
      this.version = version;
    }
  }

  /** The book's RPC face for executors in other JVMs. */
  static final class Endpoint extends DriverEndpoint {
    private final Book book;

    Endpoint(RpcEnv env, Book book) {
      super(env, NAME_PREFIX);
      this.book = book;
    }

    @Override
    protected Object answer(Object message) {
      if (!(message instanceof Object[]) || ((Object[]) message).length < 2) {
        return null;
      }
      Object[] m = (Object[]) message;
      if (AT.equals(m[0])) {
        return book.at(((Number) m[1]).longValue()).seq;
      }
      if (NEWEST_ASK.equals(m[0])) {
        long seq = book.newest().seq;
        book.took(seq);  // an executor polls to switch to it: it runs within a poll
        return seq;
      }
      if (VERSION.equals(m[0])) {
        RuleSetVersion v = book.bySeq(((Number) m[1]).longValue());
        return v == null ? new byte[0] : serialize(v);
      }
      return null;
    }

    @Override
    protected void accept(Object message) {
      if (message instanceof Object[] && ((Object[]) message).length == 5
          && COUNTS.equals(((Object[]) message)[0])) {
        Object[] m = (Object[]) message;
        book.addCounts(((Number) m[1]).longValue(), (long[]) m[2], (long[]) m[3],
            ((Number) m[4]).longValue());
      }
    }
  }

  static byte[] serialize(RuleSetVersion v) {
    return Serialized.write(v, "rules version " + v.version);
  }

  // -- the driver's API (called from Python through py4j) ----------------------------------

  /** Opens a book for events with these fields; returns its id. */
  public static String open(String eventDdl) {
    String id = UUID.randomUUID().toString();
    LOCAL.put(id, new Book(id, StructType.fromDDL(eventDdl).fieldNames(),
        DriverEndpoint.localEnv()));
    return id;
  }

  private static Book book(String id) {
    Book b = LOCAL.get(id);
    if (b == null) {
      throw new IllegalArgumentException("no rule book " + id + " in this JVM");
    }
    return b;
  }

  /** Publishes {@code compiled} (from {@link RuleCompiler}); returns the generation it takes
   * effect from (Long.MIN_VALUE: every generation, nothing ran before it). */
  public static long publish(String id, RuleSetVersion compiled) {
    return book(id).publish(compiled);
  }

  /** The newest version's sequence number in the book. */
  public static long newestSeq(String id) {
    RuleSetVersion v = book(id).newestOrNull();
    return v == null ? -1 : v.seq;
  }

  /** Whether a task has run under version {@code seq} (or a newer one). */
  public static boolean reached(String id, long seq) {
    return book(id).reached(seq);
  }

  /** Before planning a query on a fresh checkpoint: its generations start past every one
   * the book has seen (see "Lineages"); returns the base its matchers add. */
  public static long newLineage(String id) {
    return book(id).newLineage();
  }

  /** The highest epoch or batch a task has asked for (-1: none yet). */
  public static long frontier(String id) {
    long f = book(id).frontier();
    return f == Long.MIN_VALUE ? -1 : f;
  }

  public static String stats(String id) {
    return book(id).stats();
  }

  public static void close(String id) {
    Book b = LOCAL.remove(id);
    if (b != null) {
      b.close();
    }
  }

  /** The result of a match: the version that evaluated, and the matched rules in order. */
  public static StructType resultType() {
    StructType listed = new StructType()
        .add("id", DataTypes.StringType, false)
        .add("severity", DataTypes.StringType, false)
        .add("message", DataTypes.StringType, false)
        .add("ordinal", DataTypes.IntegerType, false);
    return new StructType()
        .add("version", DataTypes.StringType, false)
        .add("rules", new ArrayType(listed, false), false);
  }

  /**
   * The column that evaluates the book's rules on {@code event} (a struct of the event's
   * fields, in the book's field order): {@link #resultType()}. {@code live}: tasks take a new
   * version as soon as it is published (real-time batches, which last minutes) instead of
   * from their next epoch or batch.
   */
  public static Column column(String id, Column event, boolean live) {
    Book b = book(id);
    RuleMatcher matcher = new RuleMatcher(id, b.endpoint == null ? null : b.endpoint.address(),
        live, b.base());
    Expression target = new Literal(matcher, new ObjectType(RuleMatcher.class));
    List<Expression> args = List.of(ExpressionUtils.expression(event));
    return ExpressionUtils.column(new Invoke(target, "match", resultType(),
        CollectionConverters.asScala(args).toList(),
        CollectionConverters.asScala(List.<org.apache.spark.sql.types.AbstractDataType>of())
            .toList(),
        true, false, false));
  }

}
