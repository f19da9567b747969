package io.appliance.kafka;

import java.io.Serializable;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import io.appliance.rpc.DriverEndpoint;
import io.appliance.rpc.EndpointAddress;
import org.apache.kafka.common.TopicPartition;
import org.apache.spark.TaskContext;
import org.apache.spark.rpc.RpcEnv;

/**
 * How far a running real-time batch has durably got, long before it ends: per partition, the
 * offset below which every record was processed and every record the task wrote for them was
 * acknowledged by Kafka. The driver asks with {@link #durable}.
 *
 * <p>Why: a real-time batch commits its offsets only at its end (minutes, by default). Until
 * then the checkpoint says nothing of the batch, so whoever starts after a crash (the same
 * query restarted, or a pair's standby starting from the offsets the active committed to
 * Kafka) re-reads the whole batch so far: at 10,000 events/s, 20 s into a batch, 200,000
 * events before the first new one. A mark moves with the processing instead, so the offsets
 * a pair commits from it lag by a second or so, in every trigger mode alike.
 *
 * <p>Why a mark is safe to call processed: a real-time task pulls one record at a time
 * through the whole plan (scan, rule matching, our sink's {@code write}) and asks its reader
 * for the next record only once the previous one's rows were written; so when the reader is
 * asked again, every record below its position has gone into the task's {@link
 * KafkaDataWriter}. The writer cuts its sends into generations at each mark ({@link
 * KafkaDataWriter#seal}); a mark is durable once its generation and every one before it were
 * acknowledged without a failure (the producer completes a send only after its ack or its
 * final failure). A task with no {@link KafkaDataWriter} (another sink) never marks: nothing
 * says its output is durable. The plan must not read ahead of its writes (no Python UDF or
 * other batching stage between scan and sink): the appliance's does not.
 *
 * <p>How marks reach the driver: each real-time stream registers an endpoint holding the
 * highest durable offset per partition; the splits carry its address. A reader in the
 * driver's JVM (a local master) records into it directly; executors elsewhere keep their
 * newest marks in a map that one daemon thread per endpoint sends every {@link #MARK_MS} ms
 * (never from the task thread: an unreachable driver must not stall the tasks). The task's
 * hot path reads the clock once per record.
 */
public final class ProgressMarks {
  /** How often a reader cuts a mark, and how often an executor sends its newest ones. */
  static final long MARK_MS = 200;
  /** Marks waiting for their acknowledgements, per reader; beyond it the next waits. */
  static final int MAX_PENDING = 64;
  private static final String NAME_PREFIX = "appliance-kafka-progress-";
  /** Driver side: this JVM's endpoints (a reader in this JVM records directly). */
  private static final StreamEndpoints<Endpoint> LOCAL = new StreamEndpoints<>();
  /** Executor side: one sender per remote endpoint while readers use it. */
  private static final Map<String, Sender> REMOTE = new ConcurrentHashMap<>();

  private ProgressMarks() {}

  /**
   * The durable offsets of every real-time stream running with its checkpoint under {@code
   * checkpointDir}, as Spark's offset JSON ({@code {"topic":{"0":42}}}); {@code {}} when
   * none runs there or nothing is durable yet. Marks start afresh with each stream (a
   * query's start): what the checkpoint committed before is the caller's to merge.
   */
  public static String durable(String checkpointDir) {
    Map<TopicPartition, Long> out = new HashMap<>();
    for (Endpoint e : LOCAL.under(checkpointDir)) {
      e.marks.forEach((tp, o) -> out.merge(tp, o, Math::max));
    }
    return OffsetJson.format(out);
  }

  /** The driver-side endpoint of one stream; {@link #close} removes it. */
  static final class Endpoint extends DriverEndpoint {
    final Map<TopicPartition, Long> marks = new ConcurrentHashMap<>();

    private Endpoint(RpcEnv env) {
      super(env, NAME_PREFIX);
    }

    /** Registers a stream's endpoint, or returns null where there is no Spark RPC. */
    static Endpoint open(String checkpointLocation) {
      return LOCAL.open(Endpoint::new, checkpointLocation);
    }

    Ref ref() {
      return new Ref(address());
    }

    void record(TopicPartition tp, long offset) {
      marks.merge(tp, offset, Math::max);
    }

    @Override
    public void close() {
      LOCAL.remove(this);
      super.close();
    }

    /** One executor's newest marks: {@code Object[]{topic, partition, offset, ...}}. */
    @Override
    protected void accept(Object message) {
      if (!(message instanceof Object[])) {
        return;
      }
      Object[] m = (Object[]) message;
      for (int i = 0; i + 2 < m.length; i += 3) {
        if (m[i] instanceof String && m[i + 1] instanceof Number && m[i + 2] instanceof Number) {
          record(new TopicPartition((String) m[i], ((Number) m[i + 1]).intValue()),
              ((Number) m[i + 2]).longValue());
        }
      }
    }
  }

  /** A batch's view of its stream's endpoint: carried by each real-time split. */
  static final class Ref implements Serializable {
    private static final long serialVersionUID = 1L;
    final EndpointAddress endpoint;

    Ref(EndpointAddress endpoint) {
      this.endpoint = endpoint;
    }

    /** The marks of one reader's partition, or null where none can reach the driver. */
    Tracker track(TopicPartition tp) {
      Endpoint local = LOCAL.local(endpoint.name);
      if (local != null) {
        return new Tracker(tp, local, null);
      }
      if (!endpoint.reachable()) {
        return null;
      }
      // Atomic per endpoint with the release in close(): a sender is never handed out
      // while its last user stops it (the next batch's readers open as this one's close).
      Sender sender = REMOTE.compute(endpoint.name, (n, s) -> {
        Sender using = s == null ? new Sender(endpoint) : s;
        using.users++;
        return using;
      });
      return new Tracker(tp, null, sender);
    }
  }

  /** A mark waiting for its generation's acknowledgements. */
  private static final class Mark {
    final long offset;
    final KafkaDataWriter.Sends sends;

    Mark(long offset, KafkaDataWriter.Sends sends) {
      this.offset = offset;
      this.sends = sends;
    }
  }

  /** One real-time reader's marks; called on its task's thread only. */
  static final class Tracker implements AutoCloseable {
    private final TopicPartition tp;
    private final Endpoint local;
    private final Sender sender;
    private final long taskAttempt;
    private final ArrayDeque<Mark> pending = new ArrayDeque<>();
    private long nextAtNs;
    private long marked = -1;
    private long durable = -1;
    private long reported = -1;

    private Tracker(TopicPartition tp, Endpoint local, Sender sender) {
      this.tp = tp;
      this.local = local;
      this.sender = sender;
      TaskContext ctx = TaskContext.get();
      this.taskAttempt = ctx == null ? -1 : ctx.taskAttemptId();
    }

    /**
     * Every record below {@code offset} went through the plan (the reader is asked for the
     * next one): at most every {@link #MARK_MS} ms, cut a mark there and report the newest
     * one whose writes Kafka acknowledged.
     */
    void processedBelow(long offset) {
      long now = System.nanoTime();
      if (now < nextAtNs) {
        return;
      }
      nextAtNs = now + MARK_MS * 1_000_000L;
      KafkaDataWriter writer = KafkaDataWriter.ofTask(taskAttempt);
      if (writer == null) {
        return;
      }
      settle();
      if (offset > marked && pending.size() < MAX_PENDING) {
        pending.addLast(new Mark(offset, writer.seal()));
        marked = offset;
        settle();
      }
      if (durable > reported) {
        reported = durable;
        if (local != null) {
          local.record(tp, durable);
        } else {
          sender.offer(tp, durable);
        }
      }
    }

    /** Moves {@code durable} past every leading mark whose sends were all acknowledged. */
    private void settle() {
      Mark head;
      while ((head = pending.peekFirst()) != null && head.sends.acknowledged()) {
        durable = head.offset;
        pending.pollFirst();
      }
    }

    @Override
    public void close() {
      if (sender != null) {
        REMOTE.computeIfPresent(sender.endpoint.name, (n, s) -> {
          if (s != sender || --s.users > 0) {
            return s;
          }
          s.stop();
          return null;
        });
      }
    }
  }

  /** Sends an executor's newest marks for one remote endpoint, on a daemon thread. */
  private static final class Sender {
    final EndpointAddress endpoint;
    /** Readers using it; changed only inside {@code REMOTE.compute} for its endpoint. */
    int users;
    private final Map<TopicPartition, Long> newest = new ConcurrentHashMap<>();
    private final Thread thread;
    private volatile boolean stopped;

    Sender(EndpointAddress endpoint) {
      this.endpoint = endpoint;
      this.thread = new Thread(this::run, "appliance-kafka-progress-sender");
      this.thread.setDaemon(true);
      this.thread.start();
    }

    void offer(TopicPartition tp, long offset) {
      newest.merge(tp, offset, Math::max);
    }

    private void run() {
      Map<TopicPartition, Long> sent = new HashMap<>();
      while (!stopped) {
        try {
          Thread.sleep(MARK_MS);
        } catch (InterruptedException e) {
          stopped = true;  // closing: send what is left once more
        }
        Object[] message = changes(sent);
        if (message.length == 0) {
          continue;
        }
        try {
          endpoint.send(message);
          for (int i = 0; i < message.length; i += 3) {
            sent.put(new TopicPartition((String) message[i], (Integer) message[i + 1]),
                (Long) message[i + 2]);
          }
        } catch (Exception e) {
          // The driver is unreachable or the stream stopped: the marks wait for the next
          // round (the batch's own end commits the offsets anyway).
        }
      }
    }

    private Object[] changes(Map<TopicPartition, Long> sent) {
      List<Object> out = new ArrayList<>();
      newest.forEach((tp, o) -> {
        if (o > sent.getOrDefault(tp, -1L)) {
          out.add(tp.topic());
          out.add(tp.partition());
          out.add(o);
        }
      });
      return out.toArray();
    }

    void stop() {
      stopped = true;
      thread.interrupt();
    }
  }
}
