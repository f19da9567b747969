// Benchmark client for the embedded broker's consumer groups, with the real Java kafka-clients.
//   member <bootstrap> <topic> <group> <session ms> <heartbeat ms>
//       one group member (subscribe); prints "START <epoch ms>" just before subscribe() and
//       "OWNED <p,p,...>" after every rebalance callback, and runs until killed (SIGKILL: a
//       crash) or SIGTERM (close: it leaves the group)
//   latency <bootstrap> <topic> <group> <rate/s> <seconds> <warmup seconds> <fetch.max.wait.ms>
//       one producer, and two consumers of the same partition in this JVM: one assign()ed
//       (no group), one subscribe()d in <group> (auto-commit on, as group consumers run);
//       both time every record's produce->consume hop on this JVM's nanoTime clock.
// Prints one JSON object on stdout (latency) or OWNED lines (member).
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.*;
import java.util.concurrent.atomic.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.*;

public class BrokerGroupsBench {
    public static void main(String[] args) throws Exception {
        if (args[0].equals("member")) {
            member(args[1], args[2], args[3], args[4], args[5]);
        } else {
            latency(args[1], args[2], args[3], Integer.parseInt(args[4]), Double.parseDouble(args[5]),
                    Double.parseDouble(args[6]), args[7]);
        }
    }

    static Properties consumerProps(String bootstrap, String maxWait) {
        Properties c = new Properties();
        c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        c.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, maxWait);
        c.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        c.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        return c;
    }

    static void member(String bootstrap, String topic, String group, String sessionMs, String heartbeatMs) {
        Properties p = consumerProps(bootstrap, "100");
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, sessionMs);
        p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, heartbeatMs);
        p.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, RangeAssignor.class.getName());
        KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p);
        AtomicBoolean stopping = new AtomicBoolean(false);
        Thread main = Thread.currentThread();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            stopping.set(true);
            consumer.wakeup();
            try { main.join(15_000); } catch (InterruptedException e) { /* exiting */ }
        }));
        ConsumerRebalanceListener listener = new ConsumerRebalanceListener() {
            void report(Collection<TopicPartition> leaving) {
                StringJoiner j = new StringJoiner(",");
                consumer.assignment().stream().filter(tp -> !leaving.contains(tp))
                        .map(TopicPartition::partition).sorted().forEach(x -> j.add(x.toString()));
                System.out.println("OWNED " + j);
                System.out.flush();
            }
            public void onPartitionsRevoked(Collection<TopicPartition> parts) { report(parts); }
            public void onPartitionsAssigned(Collection<TopicPartition> parts) { report(List.of()); }
            public void onPartitionsLost(Collection<TopicPartition> parts) { report(parts); }
        };
        try {
            System.out.println("START " + System.currentTimeMillis());  // the join starts now
            System.out.flush();
            consumer.subscribe(List.of(topic), listener);
            while (!stopping.get()) consumer.poll(Duration.ofMillis(100));
        } catch (org.apache.kafka.common.errors.WakeupException e) {
            // leaving
        } finally {
            consumer.close(Duration.ofSeconds(10));
        }
    }

    static final class Hop {
        final long[] lat;
        final AtomicInteger received = new AtomicInteger();
        Hop(int total) { lat = new long[total]; }

        void record(ConsumerRecord<byte[], byte[]> r, long now, int total) {
            ByteBuffer b = ByteBuffer.wrap(r.value());
            int seq = b.getInt(0);
            if (seq >= 0 && seq < total && lat[seq] == 0) {  // seq -1: the warm-up record
                lat[seq] = now - b.getLong(4);
                received.incrementAndGet();
            }
        }
    }

    static Thread consume(KafkaConsumer<byte[], byte[]> consumer, Hop hop, int total, double limitS) {
        return new Thread(() -> {
            long deadline = System.nanoTime() + (long) (limitS * 1e9);
            while (hop.received.get() < total && System.nanoTime() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(50))) {
                    hop.record(r, System.nanoTime(), total);
                }
            }
            consumer.close();
        });
    }

    static void latency(String bootstrap, String topic, String group, int rate, double seconds,
                        double warmup, String maxWait) throws Exception {
        TopicPartition tp = new TopicPartition(topic, 0);
        int total = (int) Math.round(rate * (seconds + warmup));
        int warmupCount = (int) Math.round(rate * warmup);
        Hop assigned = new Hop(total), grouped = new Hop(total);

        KafkaConsumer<byte[], byte[]> a = new KafkaConsumer<>(consumerProps(bootstrap, maxWait));
        a.assign(List.of(tp));
        a.seekToEnd(List.of(tp));
        a.position(tp);
        Properties gp = consumerProps(bootstrap, maxWait);
        gp.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        gp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "latest");
        KafkaConsumer<byte[], byte[]> g = new KafkaConsumer<>(gp);
        g.subscribe(List.of(topic));
        long joinStart = System.nanoTime();
        while (g.assignment().isEmpty() && System.nanoTime() - joinStart < 60_000_000_000L) {
            g.poll(Duration.ofMillis(50));
        }
        g.position(tp);
        double joinedS = (System.nanoTime() - joinStart) / 1e9;
        double limit = seconds + warmup + 30;
        Thread ta = consume(a, assigned, total, limit), tg = consume(g, grouped, total, limit);
        ta.start();
        tg.start();

        long behind;
        Properties pp = new Properties();
        pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        pp.put(ProducerConfig.ACKS_CONFIG, "all");
        pp.put(ProducerConfig.LINGER_MS_CONFIG, "0");
        pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(pp)) {
            behind = PacedSend.send(producer, topic, rate, total);
        }
        ta.join((long) ((limit + 10) * 1000));
        tg.join((long) ((limit + 10) * 1000));
        System.out.printf(Locale.ROOT, "{\"rate\": %d, \"sent_late_over_1ms\": %d, \"group_join_s\": %.3f, "
                + "\"assign\": %s, \"group\": %s}%n", rate, behind, joinedS,
                summary(assigned, warmupCount, total), summary(grouped, warmupCount, total));
    }

    static String summary(Hop hop, int warmupCount, int total) {
        long[] measured = Arrays.copyOfRange(hop.lat, warmupCount, total);
        long missing = 0;
        for (long v : measured) if (v == 0) missing++;
        Arrays.sort(measured);
        int off = (int) missing;  // zeros (never received) sort first; skip them
        int n = measured.length - off;
        return String.format(Locale.ROOT,
                "{\"measured\": %d, \"missing\": %d, \"p50_ms\": %.3f, \"p99_ms\": %.3f, \"p999_ms\": %.3f, \"max_ms\": %.3f}",
                n, missing, pct(measured, off, n, 0.50), pct(measured, off, n, 0.99),
                pct(measured, off, n, 0.999), n > 0 ? measured[measured.length - 1] / 1e6 : -1.0);
    }

    static double pct(long[] sorted, int off, int n, double q) {
        if (n <= 0) return -1;
        int idx = off + Math.min(n - 1, (int) Math.ceil(q * n) - 1);
        return sorted[Math.max(off, idx)] / 1e6;
    }
}
