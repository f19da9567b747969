// Consumer-group members with the real Java kafka-clients, for tests/broker/test_groups_java.py.
//   GroupMember <bootstrap> <topic> <group> <assignor> <session ms> <members> [<instance id>]
// Runs <members> consumers (one thread each) subscribed to <topic> in <group> until killed
// or SIGTERM (then each closes and leaves the group). Each consumer commits what it read
// after every poll. Output lines, flushed, parsed by tests/broker/group_harness.py:
//   <k> OWNED <p,p,...>        its partitions after every rebalance callback
//   <k> RECS <p> <first> <last> offsets read in one poll, per partition
//   <k> COMMIT <p> <offset>     a commit the coordinator acknowledged
//   <k> COMMIT_FAILED <error>   a commit refused (a rebalance fenced it)
import java.time.Duration;
import java.util.*;
import java.util.concurrent.*;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class GroupMember {
    static final Map<String, String> ASSIGNORS = Map.of(
            "range", RangeAssignor.class.getName(),
            "roundrobin", RoundRobinAssignor.class.getName(),
            "sticky", StickyAssignor.class.getName(),
            "cooperative-sticky", CooperativeStickyAssignor.class.getName());

    static synchronized void out(String line) {
        System.out.println(line);
        System.out.flush();
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], group = args[2], assignor = args[3];
        int sessionMs = Integer.parseInt(args[4]);
        int members = Integer.parseInt(args[5]);
        String instance = args.length > 6 ? args[6] : null;
        AtomicBoolean stopping = new AtomicBoolean(false);
        List<KafkaConsumer<byte[], byte[]>> consumers = new CopyOnWriteArrayList<>();
        List<Thread> threads = new ArrayList<>();
        for (int k = 0; k < members; k++) {
            final int id = k;
            Properties p = new Properties();
            p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
            p.put(ConsumerConfig.CLIENT_ID_CONFIG, "java-member-" + id);
            p.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, ASSIGNORS.get(assignor));
            p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, Integer.toString(sessionMs));
            p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, Integer.toString(Math.max(sessionMs / 6, 500)));
            p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
            p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
            p.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "100");
            p.put(ConsumerConfig.METADATA_MAX_AGE_CONFIG, "2000");
            p.put(ConsumerConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, "500");
            if (instance != null) p.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, instance + "-" + id);
            p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
            p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
            KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p);
            consumers.add(consumer);
            Thread t = new Thread(() -> run(id, consumer, topic, stopping), "member-" + id);
            threads.add(t);
        }
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            stopping.set(true);
            for (KafkaConsumer<byte[], byte[]> c : consumers) c.wakeup();
            for (Thread t : threads) {
                try { t.join(15_000); } catch (InterruptedException e) { return; }
            }
        }));
        for (Thread t : threads) t.start();
        for (Thread t : threads) t.join();
    }

    // the partitions it owns once the callback's change is done
    static String owned(KafkaConsumer<byte[], byte[]> c, Collection<TopicPartition> leaving) {
        StringJoiner j = new StringJoiner(",");
        c.assignment().stream().filter(tp -> !leaving.contains(tp)).map(TopicPartition::partition)
                .sorted().forEach(p -> j.add(p.toString()));
        return j.toString();
    }

    static void run(int id, KafkaConsumer<byte[], byte[]> consumer, String topic, AtomicBoolean stopping) {
        try {
            consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                public void onPartitionsRevoked(Collection<TopicPartition> parts) { out(id + " OWNED " + owned(consumer, parts)); }
                public void onPartitionsAssigned(Collection<TopicPartition> parts) { out(id + " OWNED " + owned(consumer, List.of())); }
                public void onPartitionsLost(Collection<TopicPartition> parts) { out(id + " OWNED " + owned(consumer, parts)); }
            });
            while (!stopping.get()) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(200));
                if (records.isEmpty()) continue;
                Map<TopicPartition, OffsetAndMetadata> commit = new HashMap<>();
                for (TopicPartition tp : records.partitions()) {
                    List<ConsumerRecord<byte[], byte[]>> rs = records.records(tp);
                    long first = rs.get(0).offset(), last = rs.get(rs.size() - 1).offset();
                    out(id + " RECS " + tp.partition() + " " + first + " " + last);
                    commit.put(tp, new OffsetAndMetadata(last + 1));
                }
                try {
                    consumer.commitSync(commit, Duration.ofSeconds(10));
                    for (Map.Entry<TopicPartition, OffsetAndMetadata> e : commit.entrySet())
                        out(id + " COMMIT " + e.getKey().partition() + " " + e.getValue().offset());
                } catch (WakeupException e) {
                    throw e;
                } catch (RuntimeException e) {
                    out(id + " COMMIT_FAILED " + e.getClass().getSimpleName());
                }
            }
        } catch (WakeupException e) {
            // shutting down
        } finally {
            consumer.close(Duration.ofSeconds(10));
        }
    }
}
