// End-to-end alert latency driver and the JVM passthrough floor, with the real Java kafka-clients.
//   drive <bootstrap> <events> <alerts> <rate/s> <seconds> <alert every Nth> <partitions> <drain s>
//         <warm-up topic> <warm-up s> <linger ms>
//       first warms ITSELF: the same send and receive code at the same rate on <warm-up topic>
//       (which nobody else reads), so the instrument's own JIT and class loading do not land
//       in the first seconds of the measurement; prints WARM and waits for a line GO on stdin.
//       Then open-loop JSON events to <events> (every Nth one matches the example rule
//       cpu-critical); latency = alert consumed from <alerts> minus the event's SCHEDULED send
//       time, so a stalled producer or appliance counts in full (no coordinated omission).
//       One JSON object on stdout: totals, overall percentiles, and per scheduled second.
//       <linger ms> is the event producer's linger.ms (the firehose's batching; the wait is
//       inside the measured latency, since the clock starts at the scheduled send time).
//   relay <bootstrap> <events> <alerts> <seconds>
//       the floor: consume events and produce the alerting ones (key "a-...") to <alerts>
//       with the appliance's own client settings, no Spark. Prints READY once positioned.
// Event keys are "a-<seq>" (alerting) and "n-<seq>"; the appliance keys alerts by event_id,
// the relay keeps the key, so the driver measures both the same way.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.*;
import java.util.concurrent.atomic.*;
import java.util.concurrent.locks.LockSupport;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.*;

public class AlertLatencyBench {
    public static void main(String[] args) throws Exception {
        if (args[0].equals("drive")) {
            drive(args[1], args[2], args[3], Integer.parseInt(args[4]), Double.parseDouble(args[5]),
                  Integer.parseInt(args[6]), Integer.parseInt(args[7]), Double.parseDouble(args[8]),
                  args[9], Double.parseDouble(args[10]), Integer.parseInt(args[11]));
        } else if (args[0].equals("relay")) {
            relay(args[1], args[2], args[3], Double.parseDouble(args[4]));
        } else {
            throw new IllegalArgumentException("usage: drive ... | relay ...");
        }
    }

    // The appliance's sink settings (appliance/tuning.py): acks=all, linger 0, no batching wait.
    static Properties producerProps(String bootstrap) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "0");
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "false");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        return p;
    }

    // The appliance's reader settings: answer a fetch as soon as one byte is there, wait <= 5 ms.
    static Properties consumerProps(String bootstrap) {
        Properties c = new Properties();
        c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        c.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        c.put(ConsumerConfig.FETCH_MIN_BYTES_CONFIG, "1");
        c.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "5");
        c.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "2000");
        c.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        c.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        return c;
    }

    static List<TopicPartition> partitions(KafkaConsumer<?, ?> consumer, String topic) {
        List<TopicPartition> out = new ArrayList<>();
        for (PartitionInfo p : consumer.partitionsFor(topic)) out.add(new TopicPartition(topic, p.partition()));
        return out;
    }

    /** Assigned to every partition of topic at its end, positions resolved (no race with sends). */
    static KafkaConsumer<byte[], byte[]> consumerAtEnd(String bootstrap, String topic) {
        KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(consumerProps(bootstrap));
        List<TopicPartition> tps = partitions(consumer, topic);
        consumer.assign(tps);
        consumer.seekToEnd(tps);
        for (TopicPartition tp : tps) consumer.position(tp);
        return consumer;
    }

    /** Sequence number of an "a-<seq>" / "n-<seq>" key, or -1 for anything else. */
    static int seqOf(byte[] key) {
        if (key == null || key.length < 3 || key[1] != '-') return -1;
        int v = 0;
        for (int i = 2; i < key.length; i++) {
            int d = key[i] - '0';
            if (d < 0 || d > 9) return -1;
            v = v * 10 + d;
        }
        return v;
    }

    /** One paced run's bookkeeping: scheduled time and first-alert latency per sequence number. */
    static final class Run {
        final int total;
        final long[] due;          // scheduled send time per seq (nanoTime); 0 = not sent yet
        final long[] latency;      // first alert's latency per alerting seq; 0 = none yet
        final int expectedAlerts;
        final AtomicInteger received = new AtomicInteger();
        final AtomicLong duplicates = new AtomicLong();
        final AtomicLong firstAlertAt = new AtomicLong();
        long start;
        long late;
        long sendEnd;

        Run(int total, int every) {
            this.total = total;
            this.due = new long[total];
            this.latency = new long[total];
            this.expectedAlerts = (total + every - 1) / every;
        }

        /** Reads alerts on its own thread until all came or stop is set; closes the consumer. */
        Thread reader(KafkaConsumer<byte[], byte[]> consumer, AtomicBoolean stop, String name) {
            Thread t = new Thread(() -> {
                try {
                    while (!stop.get() && received.get() < expectedAlerts) {
                        for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(20))) {
                            long now = System.nanoTime();
                            int seq = seqOf(r.key());
                            if (seq < 0 || seq >= total || due[seq] == 0) continue;
                            if (latency[seq] != 0) {
                                duplicates.incrementAndGet();
                                continue;
                            }
                            latency[seq] = Math.max(1, now - due[seq]);
                            firstAlertAt.compareAndSet(0, now);
                            received.incrementAndGet();
                        }
                    }
                } finally {
                    consumer.close();
                }
            }, name);
            t.start();
            return t;
        }

        /** Sends total events open-loop at interval ns, starting 5 ms from now. */
        void send(KafkaProducer<byte[], byte[]> producer, String topic, long interval, int every,
                  int partitions) {
            start = System.nanoTime() + 5_000_000L;
            for (int i = 0; i < total; i++) {
                long at = start + i * interval;
                long now;
                // park, never spin: a spinning pacer would steal a core from the appliance
                while ((now = System.nanoTime()) < at) LockSupport.parkNanos(at - now);
                if (now - at > 1_000_000L) late++;
                due[i] = at;
                boolean alerting = i % every == 0;
                String id = (alerting ? "a-" : "n-") + i;
                String json = "{\"event_id\":\"" + id + "\",\"ts\":" + System.currentTimeMillis()
                        + ",\"source\":\"bench-" + (i % 64) + "\",\"metric\":\"cpu.util\",\"value\":"
                        + (alerting ? "97.5" : Integer.toString(i % 90)) + ",\"tags\":{\"dc\":\"b\"}}";
                producer.send(new ProducerRecord<>(topic, i % partitions,
                        id.getBytes(StandardCharsets.UTF_8), json.getBytes(StandardCharsets.UTF_8)));
            }
            producer.flush();
            sendEnd = System.nanoTime();
        }
    }

    static void drive(String bootstrap, String events, String alerts, int rate, double seconds,
                      int every, int partitions, double drainSeconds, String warmTopic,
                      double warmSeconds, int lingerMs) throws Exception {
        long interval = Math.round(1e9 / rate);
        Properties props = producerProps(bootstrap);
        props.put(ProducerConfig.LINGER_MS_CONFIG, Integer.toString(lingerMs));
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
            // 1. Warm the instrument: the same events at the same rate, read back from the warm-up
            //    topic itself (every key parses, so the reader's bookkeeping runs for each one).
            producer.partitionsFor(warmTopic);
            Run warm = new Run((int) Math.round(rate * warmSeconds), 1);
            AtomicBoolean warmStop = new AtomicBoolean();
            Thread warmReader = warm.reader(consumerAtEnd(bootstrap, warmTopic), warmStop, "warm-reader");
            warm.send(producer, warmTopic, interval, every, partitions);
            warmReader.join(10_000);
            warmStop.set(true);
            warmReader.join(10_000);

            // 2. Everything the measurement needs exists before GO: metadata, the alerts consumer
            //    positioned at the end (no alert can come before the first event is sent).
            producer.partitionsFor(events);
            KafkaConsumer<byte[], byte[]> consumer = consumerAtEnd(bootstrap, alerts);
            System.out.println("WARM " + warm.received.get() + "/" + warm.total);
            System.out.flush();
            String go = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8)).readLine();
            if (!"GO".equals(go)) {
                consumer.close();
                throw new IllegalStateException("expected GO on stdin, got " + go);
            }

            // 3. The measurement.
            Run run = new Run((int) Math.round(rate * seconds), every);
            AtomicBoolean stop = new AtomicBoolean();
            Thread reader = run.reader(consumer, stop, "alerts-reader");
            run.send(producer, events, interval, every, partitions);
            reader.join((long) (drainSeconds * 1000));
            stop.set(true);
            reader.join(10_000);
            System.out.println(report(run, rate, seconds, every));
        }
    }

    /** The JSON line the bench reads: overall and per scheduled second (alerting events only). */
    static String report(Run run, int rate, double seconds, int every) {
        int seconds_ = (int) Math.ceil(seconds);
        List<List<Long>> perSecond = new ArrayList<>();
        for (int s = 0; s < seconds_; s++) perSecond.add(new ArrayList<>());
        long[] all = new long[run.received.get()];
        int n = 0;
        for (int i = 0; i < run.total; i += every) {
            if (run.latency[i] == 0) continue;
            if (n < all.length) all[n++] = run.latency[i];
            int s = (int) ((run.due[i] - run.start) / 1_000_000_000L);
            perSecond.get(Math.min(s, seconds_ - 1)).add(run.latency[i]);
        }
        all = Arrays.copyOf(all, n);
        Arrays.sort(all);
        long first = run.firstAlertAt.get();
        StringBuilder out = new StringBuilder();
        out.append(String.format(Locale.ROOT,
                "{\"rate\": %d, \"seconds\": %s, \"sent\": %d, \"send_s\": %.3f, \"sent_late_over_1ms\": %d, "
                        + "\"alerts_expected\": %d, \"alerts_received\": %d, \"alerts_lost\": %d, "
                        + "\"duplicates\": %d, \"first_alert_after_start_ms\": %.1f, \"latency_ms\": %s, "
                        + "\"per_second\": [",
                rate, seconds, run.total, (run.sendEnd - run.start) / 1e9, run.late, run.expectedAlerts, n,
                run.expectedAlerts - n, run.duplicates.get(), first == 0 ? -1.0 : (first - run.start) / 1e6,
                summary(all)));
        for (int s = 0; s < seconds_; s++) {
            long[] v = perSecond.get(s).stream().mapToLong(Long::longValue).sorted().toArray();
            out.append(s == 0 ? "" : ", ").append(String.format(Locale.ROOT,
                    "{\"second\": %d, \"count\": %d, \"p50\": %.3f, \"p99\": %.3f, \"max\": %.3f}",
                    s, v.length, pct(v, 0.50), pct(v, 0.99), v.length == 0 ? -1.0 : v[v.length - 1] / 1e6));
        }
        return out.append("]}").toString();
    }

    static String summary(long[] sorted) {
        return String.format(Locale.ROOT,
                "{\"count\": %d, \"p50\": %.3f, \"p90\": %.3f, \"p99\": %.3f, \"p999\": %.3f, \"max\": %.3f}",
                sorted.length, pct(sorted, 0.50), pct(sorted, 0.90), pct(sorted, 0.99), pct(sorted, 0.999),
                sorted.length == 0 ? -1.0 : sorted[sorted.length - 1] / 1e6);
    }

    /** Nearest-rank percentile in ms; -1 when empty. */
    static double pct(long[] sorted, double q) {
        if (sorted.length == 0) return -1;
        int idx = Math.min(sorted.length - 1, Math.max(0, (int) Math.ceil(q * sorted.length) - 1));
        return sorted[idx] / 1e6;
    }

    static void relay(String bootstrap, String events, String alerts, double seconds) throws Exception {
        long end = System.nanoTime() + (long) (seconds * 1e9);
        long forwarded = 0;
        try (KafkaConsumer<byte[], byte[]> consumer = consumerAtEnd(bootstrap, events);
             KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerProps(bootstrap))) {
            producer.partitionsFor(alerts);
            System.out.println("READY");
            System.out.flush();
            while (System.nanoTime() < end) {
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(100))) {
                    byte[] key = r.key();
                    if (key != null && key.length > 0 && key[0] == 'a') {
                        producer.send(new ProducerRecord<>(alerts, key, r.value()));
                        forwarded++;
                    }
                }
            }
        }
        System.out.println("{\"forwarded\": " + forwarded + "}");
    }
}
