package io.appliance.kafka;

import java.io.Serializable;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

import io.appliance.rpc.DriverEndpoint;
import io.appliance.rpc.EndpointAddress;
import org.apache.spark.rpc.RpcEnv;

/**
 * Ends a running real-time batch on request, so a query can be stopped at a committed batch.
 *
 * <p>Why: a real-time batch runs for minutes (its deadline is fixed when its tasks start), and
 * a query stopped mid-batch replays the whole batch from its start offsets when it starts
 * again: a lone appliance restarted by systemd or a deploy would re-read minutes of events
 * before its first new alert. So before the appliance stops its query it asks the source to
 * end the running batch now: every reader of that batch then returns "no record", which is
 * how a real-time reader ends its batch, Spark commits the batch with the offsets read so
 * far, and the caller stops the query once that commit is written
 * ({@code appliance.process.query_stop}).
 *
 * <p>How the request reaches the readers: each real-time stream registers an RPC endpoint
 * on the driver holding a request counter; the splits it plans carry the endpoint's address
 * and the counter's value at planning time. A reader ends its batch once the counter has moved
 * past that value. Readers in the driver's JVM (a local master) read the counter directly;
 * executors elsewhere learn it from one poller thread per JVM that asks each endpoint every
 * {@link #POLL_MS} ms while readers use it. The hot path reads one volatile long.
 */
public final class BatchEnd {
  static final long POLL_MS = 100;
  private static final String POLL = "appliance-kafka-batch-end?";
  private static final String NAME_PREFIX = "appliance-kafka-batch-end-";
  /** Driver side: this JVM's endpoints (a reader in this JVM reads them directly). */
  private static final StreamEndpoints<Endpoint> LOCAL = new StreamEndpoints<>();
  /** Executor side: the last counter value polled per remote endpoint. */
  private static final Map<String, Remote> REMOTE = new ConcurrentHashMap<>();

  private BatchEnd() {}

  /**
   * Asks every real-time stream of this driver whose checkpoint lies under {@code
   * checkpointDir} to end its running batch now. Returns how many streams were asked (0: no
   * real-time stream runs there; the caller then stops the query the plain way).
   */
  public static int request(String checkpointDir) {
    int asked = 0;
    for (Endpoint e : LOCAL.under(checkpointDir)) {
      e.requests.incrementAndGet();
      asked++;
    }
    return asked;
  }

  /** The driver-side endpoint of one stream; {@link #close} removes it. */
  static final class Endpoint extends DriverEndpoint {
    private final AtomicLong requests = new AtomicLong();

    private Endpoint(RpcEnv env) {
      super(env, NAME_PREFIX);
    }

    /** Registers a stream's endpoint, or returns null where there is no Spark RPC. */
    static Endpoint open(String checkpointLocation) {
      return LOCAL.open(Endpoint::new, checkpointLocation);
    }

    /** What the splits of a batch planned now carry. */
    Ref ref() {
      return new Ref(address(), requests.get());
    }

    @Override
    public void close() {
      LOCAL.remove(this);
      super.close();
    }

    @Override
    protected Object answer(Object message) {
      return POLL.equals(message) ? requests.get() : null;
    }
  }

  /** A batch's view of its stream's endpoint: carried by each split, read by its reader. */
  static final class Ref implements Serializable {
    private static final long serialVersionUID = 2L;
    final EndpointAddress endpoint;
    /** The request counter when the batch was planned: a larger value ends the batch. */
    final long planned;

    Ref(EndpointAddress endpoint, long planned) {
      this.endpoint = endpoint;
      this.planned = planned;
    }

    /** Starts watching (executor side); {@link Watch#close} stops it. */
    Watch watch() {
      Endpoint local = LOCAL.local(endpoint.name);
      if (local != null) {
        return new Watch(this, local.requests, null);
      }
      if (!endpoint.reachable()) {
        return null;
      }
      // Atomic per endpoint with the release in Watch.close(): a poller is never handed out
      // while its last user stops it (the next batch's readers open as this one's close).
      Remote remote = REMOTE.compute(endpoint.name, (n, r) -> {
        Remote using = r == null ? new Remote(this) : r;
        using.users++;
        return using;
      });
      return new Watch(this, remote.requests, remote);
    }
  }

  /** One reader's question "has an end been asked for since my batch was planned?". */
  static final class Watch implements AutoCloseable {
    private final long planned;
    private final AtomicLong requests;
    private final Remote remote;

    private Watch(Ref ref, AtomicLong requests, Remote remote) {
      this.planned = ref.planned;
      this.requests = requests;
      this.remote = remote;
    }

    boolean requested() {
      return requests.get() > planned;
    }

    @Override
    public void close() {
      if (remote != null) {
        REMOTE.computeIfPresent(remote.ref.endpoint.name, (n, r) -> {
          if (r != remote || --r.users > 0) {
            return r;
          }
          r.stop();
          return null;
        });
      }
    }
  }

  /** An endpoint in another JVM, polled on a daemon thread while readers watch it. */
  private static final class Remote {
    private final Ref ref;
    final AtomicLong requests;
    /** Readers watching it; changed only inside {@code REMOTE.compute} for its endpoint. */
    int users;
    private final Thread poller;
    private volatile boolean stopped;

    Remote(Ref ref) {
      this.ref = ref;
      this.requests = new AtomicLong(ref.planned);
      this.poller = new Thread(this::poll, "appliance-kafka-batch-end-poller");
      this.poller.setDaemon(true);
      this.poller.start();
    }

    private void poll() {
      while (!stopped) {
        try {
          Object value = ref.endpoint.ask(POLL);
          if (value instanceof Number) {
            requests.accumulateAndGet(((Number) value).longValue(), Math::max);
          }
        } catch (Exception e) {
          // The driver is unreachable or its stream stopped (the endpoint is gone): the
          // batch keeps its deadline. Ask again later while a reader still watches.
        }
        try {
          Thread.sleep(POLL_MS);
        } catch (InterruptedException e) {
          return;
        }
      }
    }

    void stop() {
      stopped = true;
      poller.interrupt();
    }
  }
}
