package io.appliance.log;

import java.util.regex.Pattern;

import org.apache.logging.log4j.LogManager;
import org.apache.logging.log4j.core.Appender;
import org.apache.logging.log4j.core.Filter;
import org.apache.logging.log4j.core.LogEvent;
import org.apache.logging.log4j.core.LoggerContext;
import org.apache.logging.log4j.core.filter.AbstractFilter;
import org.apache.logging.log4j.core.filter.AbstractFilterable;
import org.apache.logging.log4j.core.filter.CompositeFilter;

/**
 * Keeps off the terminal the errors Spark logs when a continuous query stops cleanly.
 *
 * <p>Why: stopping a continuous query (Ctrl-C, a rules swap) unregisters its epoch coordinator
 * on the driver a little before the query's tasks are cancelled. A task that reports an epoch
 * boundary in between finds no coordinator: Spark logs "Aborting task", its writer's "is
 * aborting" / "aborted" and the executor's "Exception in task", all at ERROR, all caused by
 * "Could not find EpochCoordinator-...". Nothing is lost (the epoch was not committed; the next
 * query replays it), and the race cannot be closed from outside Spark: the order is Spark's.
 * An operator who pressed Ctrl-C should not read four errors for it, so on the terminal these
 * lines are dropped; the log file keeps them whole, as it keeps the stop's TaskKilled warnings.
 *
 * <p>Which lines: an event whose exception, or any of its causes, says the coordinator is gone;
 * and the writer's two abort lines (they carry no exception) when that same thread has just
 * logged such an event. A task that fails for any other reason still shows all four lines.
 *
 * <p>Installed from Python once the session exists ({@link #install}): the appender is defined
 * by the shipped properties file, whose parser cannot see classes of a jar Spark adds later.
 */
public final class ContinuousStopNoise extends AbstractFilter {
  /** Spark's message when a task reaches an epoch coordinator that has been stopped. */
  static final String COORDINATOR_GONE = "Could not find EpochCoordinator";
  /** The continuous writer's logger (by its class's simple name: the package has moved). */
  static final String WRITER_LOGGER = ".ContinuousWriteRDD";
  static final Pattern WRITER_ABORT =
      Pattern.compile("Writer for partition \\d+ (is aborting|aborted)\\.");
  /** How deep a cause chain is followed (a cycle or a pathological chain ends the walk). */
  private static final int MAX_CAUSES = 16;

  /** Set on a task thread by a coordinator-gone event, for the writer's lines that follow. */
  private final ThreadLocal<Boolean> afterGone = ThreadLocal.withInitial(() -> Boolean.FALSE);

  ContinuousStopNoise() {
    super(Result.DENY, Result.NEUTRAL);
  }

  /**
   * Adds the filter to the appender named {@code appenderName} of Spark's logger context.
   * Returns false (and changes nothing) where there is no such appender that takes filters:
   * the operator's own log4j2 configuration, or a driver started without the appliance's.
   */
  public static boolean install(String appenderName) {
    // The context Spark's classes log to: the one of the class loader log4j itself came from
    // (this class comes from a jar Spark adds later, whose loader could get a context of its
    // own).
    LoggerContext context =
        (LoggerContext) LogManager.getContext(LogManager.class.getClassLoader(), false);
    Appender appender = context.getConfiguration().getAppender(appenderName);
    if (!(appender instanceof AbstractFilterable filterable)) {
      return false;
    }
    if (installed(filterable.getFilter())) {
      return true;  // a second session in the same JVM
    }
    ContinuousStopNoise filter = new ContinuousStopNoise();
    filter.start();
    filterable.addFilter(filter);
    return true;
  }

  /** Whether {@code filter} is, or holds, one of these (by name: each session's jar loader
   * defines the class anew). */
  private static boolean installed(Filter filter) {
    if (filter instanceof CompositeFilter composite) {
      for (Filter each : composite.getFiltersArray()) {
        if (installed(each)) {
          return true;
        }
      }
      return false;
    }
    return filter != null && filter.getClass().getName().equals(ContinuousStopNoise.class.getName());
  }

  @Override
  public Result filter(LogEvent event) {
    if (coordinatorGone(event.getThrown())) {
      afterGone.set(Boolean.TRUE);
      return onMatch;
    }
    if (afterGone.get()) {
      if (event.getLoggerName() != null && event.getLoggerName().endsWith(WRITER_LOGGER)
          && WRITER_ABORT.matcher(event.getMessage().getFormattedMessage()).matches()) {
        return onMatch;
      }
      afterGone.set(Boolean.FALSE);
    }
    return onMismatch;
  }

  static boolean coordinatorGone(Throwable thrown) {
    Throwable t = thrown;
    for (int i = 0; t != null && i < MAX_CAUSES; i++, t = t.getCause()) {
      String message = t.getMessage();
      if (message != null && message.startsWith(COORDINATOR_GONE)) {
        return true;
      }
    }
    return false;
  }

  @Override
  public String toString() {
    return ContinuousStopNoise.class.getSimpleName();
  }
}
