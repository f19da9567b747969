// Checks of the micro-batch stream's time-driven paths with an injected clock (no sleeping),
// and of the initial-offset store's Hadoop configuration, against the real embedded broker.
// Run through spark-submit (as an operator would run a query) with
//   --conf spark.hadoop.fs.permissions.umask-mode=077
//   --conf spark.hadoop.fs.file.impl.disable.cache=true
// args: bootstrap, small topic (5 records, 1 partition), big topic (3000 records,
// 2 partitions), a fresh work directory. Prints "PASS <check>" / "FAIL <check>: <why>";
// tests/connector/test_connector_adaptive.py asserts one line per check.
package io.appliance.kafka;

import static io.appliance.kafka.Checks.expect;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.HashMap;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.hadoop.conf.Configuration;
import org.apache.kafka.common.TopicPartition;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.connector.read.streaming.ReadLimit;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

public class MicroBatchStreamCheck {
    static String bootstrap;
    static String small;
    static String big;
    static Path work;

    static CaseInsensitiveStringMap options(String... pairs) {
        Map<String, String> m = new HashMap<>();
        m.put("kafka.bootstrap.servers", bootstrap);
        for (int i = 0; i < pairs.length; i += 2) {
            m.put(pairs[i], pairs[i + 1]);
        }
        return new CaseInsensitiveStringMap(m);
    }

    static KafkaMicroBatchStream stream(AtomicLong clock, String checkpoint, String... pairs) {
        SourceOptions o = SourceOptions.parse(options(pairs)).check(SourceOptions.ReadMode.STREAM);
        return new KafkaMicroBatchStream(o, work.resolve(checkpoint).toString(), new Configuration(),
            clock::get);
    }

    static long total(KafkaSourceOffset from, KafkaSourceOffset to) {
        long n = 0;
        for (Map.Entry<TopicPartition, Long> e : to.offsets().entrySet()) {
            n += e.getValue() - from.offsets().getOrDefault(e.getKey(), 0L);
        }
        return n;
    }

    public static void main(String[] args) throws Exception {
        bootstrap = args[0];
        small = args[1];
        big = args[2];
        work = Paths.get(args[3]);
        Checks checks = new Checks();

        checks.run("min_offsets_wait_until_max_trigger_delay_expires", () -> {
            AtomicLong clock = new AtomicLong(1_000_000);
            KafkaMicroBatchStream s = stream(clock, "delay", "subscribe", small,
                "startingOffsets", "earliest", "minOffsetsPerTrigger", "20", "maxTriggerDelay", "10s");
            try {
                KafkaSourceOffset start = (KafkaSourceOffset) s.initialOffset();
                ReadLimit limit = s.getDefaultReadLimit();
                expect(s.latestOffset(start, limit).equals(start), "admitted at once with 5 < 20 offsets");
                clock.addAndGet(9_999);
                expect(s.latestOffset(start, limit).equals(start), "admitted 1 ms before the delay expired");
                clock.addAndGet(1);
                KafkaSourceOffset end = (KafkaSourceOffset) s.latestOffset(start, limit);
                expect(total(start, end) == 5, "expected the 5 waiting offsets, got " + total(start, end));
                // the delay restarts from the last admission
                clock.addAndGet(9_999);
                expect(s.latestOffset(end, limit).equals(end), "nothing new must admit nothing");
            } finally {
                s.stop();
            }
        });

        checks.run("adaptive_limit_follows_measured_batches", () -> {
            AtomicLong clock = new AtomicLong(5_000_000);
            KafkaMicroBatchStream s = stream(clock, "adaptive", "subscribe", big,
                "startingOffsets", "earliest", "maxOffsetsPerTrigger", "auto",
                "adaptiveInitialOffsetsPerSecond", "1000", "adaptiveTargetBatchDuration", "1s");
            try {
                KafkaSourceOffset start = (KafkaSourceOffset) s.initialOffset();
                ReadLimit limit = s.getDefaultReadLimit();
                KafkaSourceOffset first = (KafkaSourceOffset) s.latestOffset(start, limit);
                expect(total(start, first) == 1000, "first batch: initial rate x 1 s = 1000, got " + total(start, first));
                clock.addAndGet(250);  // the batch took 250 ms: 4000 offsets/s
                Map<String, String> m = s.metrics(Optional.of(first));
                expect("4000".equals(m.get("adaptiveOffsetsPerTrigger")), "metrics " + m);
                KafkaSourceOffset second = (KafkaSourceOffset) s.latestOffset(first, limit);
                expect(total(first, second) == 2000, "second batch: the 2000 left (limit 4000), got " + total(first, second));
                clock.addAndGet(2_000); // 2000 in 2 s, 1 s over target: 4000 - 3000 - 0.2*1000
                m = s.metrics(Optional.of(second));
                expect("800".equals(m.get("adaptiveOffsetsPerTrigger")), "metrics " + m);
                expect("0".equals(m.get("maxOffsetsBehindLatest")), "lag metric " + m);
            } finally {
                s.stop();
            }
        });

        checks.run("adaptive_limit_ends_a_batch_at_the_next_trigger_without_metrics", () -> {
            AtomicLong clock = new AtomicLong(7_000_000);
            KafkaMicroBatchStream s = stream(clock, "adaptive2", "subscribe", big,
                "startingOffsets", "earliest", "maxOffsetsPerTrigger", "auto",
                "adaptiveInitialOffsetsPerSecond", "500");
            try {
                KafkaSourceOffset start = (KafkaSourceOffset) s.initialOffset();
                ReadLimit limit = s.getDefaultReadLimit();
                KafkaSourceOffset first = (KafkaSourceOffset) s.latestOffset(start, limit);
                expect(total(start, first) == 500, "first batch " + total(start, first));
                clock.addAndGet(500);  // 1000/s measured when the next trigger asks
                KafkaSourceOffset second = (KafkaSourceOffset) s.latestOffset(first, limit);
                expect(total(first, second) == 1000, "second batch " + total(first, second));
            } finally {
                s.stop();
            }
        });

        checks.run("initial_offsets_file_uses_the_sessions_hadoop_conf", () -> {
            SparkSession spark = SparkSession.builder().getOrCreate();
            expect(!"077".equals(new Configuration().get("fs.permissions.umask-mode")),
                "a bare Hadoop Configuration must not see spark.hadoop.* (else this check proves nothing)");
            MicroBatchStream s = new KafkaScan(options("subscribe", small, "startingOffsets", "earliest"))
                .toMicroBatchStream(work.resolve("session-conf").toString());
            try {
                s.initialOffset();
            } finally {
                s.stop();
            }
            Path file = work.resolve("session-conf").resolve(InitialOffsetStore.FILE);
            String perms = PosixFilePermissions.toString(Files.getPosixFilePermissions(file));
            expect(perms.equals("rw-------"),
                "spark.hadoop.fs.permissions.umask-mode=077 did not reach the store: " + perms);
            spark.stop();
        });

        checks.finish();
    }
}
