// Benchmark client for the embedded broker, using the real Java kafka-clients.
//   latency <bootstrap> <topic> <rate/s> <seconds> <warmup seconds> <fetch.max.wait.ms>
//       one produce->consume hop; producer and consumer share this JVM's nanoTime clock
//   throughput <bootstrap> <topic> <seconds> <value bytes>
//       produce as fast as possible for <seconds>, then consume everything from earliest
// Prints one JSON object on stdout.
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.*;
import java.util.concurrent.atomic.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.*;

public class BrokerLatencyBench {
    public static void main(String[] args) throws Exception {
        if (args[0].equals("latency")) {
            latency(args[1], args[2], Integer.parseInt(args[3]), Double.parseDouble(args[4]),
                    Double.parseDouble(args[5]), args[6]);
        } else {
            throughput(args[1], args[2], Double.parseDouble(args[3]), Integer.parseInt(args[4]));
        }
    }

    static Properties producerProps(String bootstrap, String linger, String batchSize) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.LINGER_MS_CONFIG, linger);
        p.put(ProducerConfig.BATCH_SIZE_CONFIG, batchSize);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        return p;
    }

    static Properties consumerProps(String bootstrap, String maxWait) {
        Properties c = new Properties();
        c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        c.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        c.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, maxWait);
        c.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        c.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        return c;
    }

    static void latency(String bootstrap, String topic, int rate, double seconds, double warmup,
                        String maxWait) throws Exception {
        TopicPartition tp = new TopicPartition(topic, 0);
        int total = (int) Math.round(rate * (seconds + warmup));
        int warmupCount = (int) Math.round(rate * warmup);
        long[] lat = new long[total];
        AtomicInteger received = new AtomicInteger();
        AtomicBoolean ready = new AtomicBoolean(false);
        Thread consumerThread = new Thread(() -> {
            try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(consumerProps(bootstrap, maxWait))) {
                consumer.assign(List.of(tp));
                consumer.seekToEnd(List.of(tp));
                consumer.position(tp);
                ready.set(true);
                long deadline = System.nanoTime() + (long) ((seconds + warmup + 30) * 1e9);
                while (received.get() < total && System.nanoTime() < deadline) {
                    for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(50))) {
                        long now = System.nanoTime();
                        ByteBuffer b = ByteBuffer.wrap(r.value());
                        int seq = b.getInt(0);
                        long sent = b.getLong(4);
                        if (seq >= 0 && seq < total) {  // seq -1: the connection warm-up record
                            lat[seq] = now - sent;
                            received.incrementAndGet();
                        }
                    }
                }
            }
        });
        consumerThread.start();
        while (!ready.get()) Thread.sleep(5);

        long behind;
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerProps(bootstrap, "0", "16384"))) {
            behind = PacedSend.send(producer, topic, rate, total);  // primed before the clock
        }
        consumerThread.join((long) ((seconds + warmup + 40) * 1000));
        long[] measured = Arrays.copyOfRange(lat, warmupCount, total);
        long missing = 0;
        for (long v : measured) if (v == 0) missing++;
        Arrays.sort(measured);
        int off = (int) missing;  // zeros (never received) sort first; skip them
        int n = measured.length - off;
        System.out.printf(Locale.ROOT,
                "{\"rate\": %d, \"measured\": %d, \"missing\": %d, \"sent_late_over_1ms\": %d, "
                        + "\"p50_ms\": %.3f, \"p99_ms\": %.3f, \"p999_ms\": %.3f, \"max_ms\": %.3f}%n",
                rate, n, missing, behind, pct(measured, off, n, 0.50), pct(measured, off, n, 0.99),
                pct(measured, off, n, 0.999), n > 0 ? measured[measured.length - 1] / 1e6 : -1.0);
    }

    static double pct(long[] sorted, int off, int n, double q) {
        if (n <= 0) return -1;
        int idx = off + Math.min(n - 1, (int) Math.ceil(q * n) - 1);
        return sorted[Math.max(off, idx)] / 1e6;
    }

    static void throughput(String bootstrap, String topic, double seconds, int valueBytes) throws Exception {
        TopicPartition tp = new TopicPartition(topic, 0);
        byte[] value = new byte[valueBytes];
        long sent = 0;
        long t0, t1;
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerProps(bootstrap, "5", "262144"))) {
            producer.send(new ProducerRecord<>(topic, 0, null, value)).get();
            sent = 1;
            t0 = System.nanoTime();
            long end = t0 + (long) (seconds * 1e9);
            while (System.nanoTime() < end) {
                for (int i = 0; i < 1000; i++) producer.send(new ProducerRecord<>(topic, 0, null, value));
                sent += 1000;
            }
            producer.flush();
            t1 = System.nanoTime();
        }
        double produceRate = (sent - 1) / ((t1 - t0) / 1e9);
        long got = 0;
        long c0, c1;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(consumerProps(bootstrap, "100"))) {
            consumer.assign(List.of(tp));
            consumer.seekToBeginning(List.of(tp));
            consumer.position(tp);
            c0 = System.nanoTime();
            long deadline = c0 + 120_000_000_000L;
            while (got < sent && System.nanoTime() < deadline) {
                got += consumer.poll(Duration.ofMillis(100)).count();
            }
            c1 = System.nanoTime();
        }
        System.out.printf(Locale.ROOT,
                "{\"value_bytes\": %d, \"produced\": %d, \"produce_rps\": %.0f, \"consumed\": %d, "
                        + "\"consume_rps\": %.0f, \"produce_mb_s\": %.1f, \"consume_mb_s\": %.1f}%n",
                valueBytes, sent, produceRate, got, got / ((c1 - c0) / 1e9),
                produceRate * valueBytes / 1e6, got / ((c1 - c0) / 1e9) * valueBytes / 1e6);
    }
}
