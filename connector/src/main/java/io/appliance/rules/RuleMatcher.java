package io.appliance.rules;

import java.io.Serializable;

import io.appliance.rpc.EndpointAddress;
import org.apache.spark.TaskContext;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.execution.streaming.continuous.EpochTracker;
import scala.Option;

/**
 * The query plan's handle on a {@link RuleBook}: the target of the one expression that
 * evaluates the rules ({@link RuleBook#column}).
 *
 * <p>It holds only the book's id and the driver's address, so the plan and its generated code
 * are the same whatever the rules (a swap compiles nothing, and the warm-up's classes are the
 * query's). Each task deserializes its own instance and keeps its state here: the generation
 * it is in and its {@link TaskRules} for that generation's version.
 *
 * <p>Generations: a micro-batch task belongs to one batch (Spark's {@code
 * streaming.sql.batchId} task property); a continuous task moves through epochs ({@code
 * EpochTracker}, read per event: a thread-local read), each plus the lineage's base (see
 * {@link RuleBook}); anything else (a batch query) evaluates
 * under the newest version. A <i>live</i> matcher (real-time batches, which last minutes) takes
 * the newest version at the first event after it is published (a volatile read per event):
 * each partition then switches at one record, so every event is still evaluated by exactly one
 * version, which its alert names.
 */
public final class RuleMatcher implements Serializable {
  private static final long serialVersionUID = 2L;
  private static final String BATCH_ID = "streaming.sql.batchId";
  private static final long NO_BATCH = Long.MIN_VALUE;

  private final String bookId;
  /** Null where the driver has no RPC address (no executor elsewhere can ask). */
  private final EndpointAddress driver;
  private final boolean live;
  /** The book's base for this query's lineage, added to its epoch or batch ids. */
  private final long base;

  private transient boolean started;
  private transient RuleBook.Source source;
  private transient long batch;
  private transient long generation;
  private transient TaskRules rules;

  RuleMatcher(String bookId, EndpointAddress driver, boolean live, long base) {
    this.bookId = bookId;
    this.driver = driver;
    this.live = live;
    this.base = base;
  }

  private void start() {
    started = true;
    RuleBook.Book local = RuleBook.LOCAL.get(bookId);
    if (local != null) {
      source = local;
    } else if (driver != null && driver.reachable()) {
      source = RemoteBook.of(bookId, driver);
    } else {
      throw new IllegalStateException("rule book " + bookId + " is neither in this JVM nor "
          + "reachable over Spark RPC");
    }
    batch = NO_BATCH;
    TaskContext task = TaskContext.get();
    if (task != null) {
      String id = task.getLocalProperty(BATCH_ID);
      if (id != null) {
        batch = Long.parseLong(id);
      }
      task.addTaskCompletionListener(context -> {
        if (rules != null) {
          rules.retire();
        }
      });
    }
  }

  private long currentGeneration() {
    if (batch != NO_BATCH) {
      return base + batch;
    }
    Option<Object> epoch = EpochTracker.getCurrentEpoch();
    return epoch.isDefined() ? base + (Long) epoch.get() : RuleBook.NEWEST;
  }

  /** The rules' verdict on one valid event (a struct of its fields): {@code struct<version,
   * rules: array<struct<id, severity, message, ordinal>>>}. */
  public InternalRow match(InternalRow event) {
    if (!started) {
      start();
    }
    if (live) {
      RuleSetVersion newest = source.newest();
      if (rules == null || rules.set != newest) {
        if (rules != null) {
          rules.retire();
        }
        rules = new TaskRules(newest);
        source.took(newest.seq);
      }
      return rules.match(event);
    }
    long g = currentGeneration();
    if (rules == null || g != generation) {
      RuleSetVersion version = source.at(g);
      if (rules == null || rules.set != version) {
        if (rules != null) {
          rules.retire();
        }
        rules = new TaskRules(version);
      }
      generation = g;
    }
    return rules.match(event);
  }
}
