package io.appliance.rules;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentSkipListMap;

import io.appliance.rpc.EndpointAddress;

/**
 * A {@link RuleBook} seen from an executor in another JVM: asks the driver's book which version
 * a generation runs, fetches each version once, and reports this JVM's per-rule counts back.
 *
 * <p>One per book per JVM, shared by its tasks. A generation's answer is kept (it never
 * changes: the book fixes a generation's version when it is first asked), so the tasks of one
 * epoch or batch cost one RPC between them. A version arrives serialized and is read with the
 * task's class loader (the connector jar is not on the JVM's own class path on executors).
 */
final class RemoteBook implements RuleBook.Source {
  private static final Map<String, RemoteBook> BOOKS = new ConcurrentHashMap<>();
  private static final int GENERATIONS_KEPT = 256;
  static final long REPORT_MS = 2000;
  static final long POLL_MS = 100;

  private final EndpointAddress address;
  private final ConcurrentSkipListMap<Long, Long> seqByGeneration = new ConcurrentSkipListMap<>();
  private final ConcurrentSkipListMap<Long, RuleSetVersion> versions =
      new ConcurrentSkipListMap<>();
  private final ClassLoader loader;
  /** The driver's newest version, for live switching (null until a task asks for it). */
  private volatile RuleSetVersion newest;
  private volatile boolean polling;

  private RemoteBook(EndpointAddress address, ClassLoader loader) {
    this.address = address;
    this.loader = loader;
    Thread reporter = new Thread(this::report, "appliance-rules-counts");
    reporter.setDaemon(true);
    reporter.setContextClassLoader(loader);
    reporter.start();
  }

  @Override
  public RuleSetVersion newest() {
    RuleSetVersion v = newest;
    if (v != null) {
      return v;
    }
    synchronized (this) {
      if (newest == null) {
        newest = pollNewest(null);
        if (!polling) {
          polling = true;
          Thread poller = new Thread(this::pollLoop, "appliance-rules-newest");
          poller.setDaemon(true);
          poller.setContextClassLoader(loader);
          poller.start();
        }
      }
      return newest;
    }
  }

  @Override
  public void took(long seq) {
    // The driver counts a version as taken when an executor polls for it (pollNewest).
  }

  /** The driver's newest version: {@code current} if it is still the newest. */
  private RuleSetVersion pollNewest(RuleSetVersion current) {
    long seq = ((Number) address.ask(new Object[] {RuleBook.NEWEST_ASK, 0L})).longValue();
    if (current != null && current.seq == seq) {
      return current;
    }
    RuleSetVersion v = versions.get(seq);
    return v != null ? v : fetch(seq);
  }

  /** Every {@link #POLL_MS} ms: the driver's newest version, fetched off the task threads. */
  private void pollLoop() {
    while (true) {
      try {
        Thread.sleep(POLL_MS);
        newest = pollNewest(newest);
      } catch (InterruptedException e) {
        return;
      } catch (RuntimeException e) {
        // The driver is unreachable or busy: tasks keep the version they have.
      }
    }
  }

  static RemoteBook of(String bookId, EndpointAddress address) {
    ClassLoader loader = Thread.currentThread().getContextClassLoader();
    return BOOKS.computeIfAbsent(bookId, id -> new RemoteBook(address, loader));
  }

  @Override
  public RuleSetVersion at(long generation) {
    Long seq = generation == RuleBook.NEWEST ? null : seqByGeneration.get(generation);
    if (seq == null) {
      seq = ((Number) address.ask(new Object[] {RuleBook.AT, generation})).longValue();
      if (generation != RuleBook.NEWEST) {
        seqByGeneration.put(generation, seq);
        while (seqByGeneration.size() > GENERATIONS_KEPT) {
          seqByGeneration.pollFirstEntry();
        }
      }
    }
    RuleSetVersion v = versions.get(seq);
    return v != null ? v : fetch(seq);
  }

  private synchronized RuleSetVersion fetch(long seq) {
    RuleSetVersion v = versions.get(seq);
    if (v != null) {
      return v;
    }
    byte[] bytes = (byte[]) address.ask(new Object[] {RuleBook.VERSION, seq});
    if (bytes.length == 0) {
      throw new IllegalStateException("the driver no longer keeps rules version #" + seq);
    }
    v = deserialize(bytes);
    versions.put(seq, v);
    while (versions.size() > RuleBook.KEEP) {
      RuleSetVersion old = versions.pollFirstEntry().getValue();
      report(old);
      reported.remove(old.seq);
    }
    return v;
  }

  private RuleSetVersion deserialize(byte[] bytes) {
    return (RuleSetVersion) Serialized.read(bytes, loader, "a rules version from the driver");
  }

  private void report() {
    while (true) {
      try {
        Thread.sleep(REPORT_MS);
      } catch (InterruptedException e) {
        return;
      }
      for (RuleSetVersion v : versions.values()) {
        report(v);
      }
    }
  }

  /** What was reported of each version so far (by seq). */
  private final Map<Long, RuleSetVersion.Snapshot> reported = new ConcurrentHashMap<>();

  /** Sends this JVM's counts of {@code v} since the last report (best effort). */
  private void report(RuleSetVersion v) {
    RuleSetVersion.Snapshot now = v.snapshot();
    RuleSetVersion.Snapshot before = reported.get(v.seq);
    int n = v.rules.length;
    long[] evaluated = new long[n];
    long[] matched = new long[n];
    boolean any = false;
    for (int i = 0; i < n; i++) {
      evaluated[i] = now.evaluated[i] - (before == null ? 0 : before.evaluated[i]);
      matched[i] = now.matched[i] - (before == null ? 0 : before.matched[i]);
      any |= evaluated[i] != 0;
    }
    long events = now.events - (before == null ? 0 : before.events);
    if (!any && events == 0) {
      return;
    }
    try {
      address.send(new Object[] {RuleBook.COUNTS, v.seq, evaluated, matched, events});
      reported.put(v.seq, now);
    } catch (RuntimeException e) {
      // The driver is gone or busy: these counts go with the next report.
    }
  }
}
