// Checks of the sink's shared producers (ProducerCache): leases, retirement and the idle
// evictor, against a port nobody listens on (no broker is needed to open or close one).
// Run through spark-submit with spark.kafka.producer.cache.* set, so the evictor reads
// them from the session's SparkEnv as it does on an executor.
// Each check prints PASS or FAIL with its name (Checks.java); exits 1 if any failed.
// tests/connector/test_connector_producer_cache.py asserts one line per check.
package io.appliance.kafka;

import static io.appliance.kafka.Checks.expect;

import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkEnv;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

public class ProducerCacheCheck {
    /** Sink options of their own per check (the client id is part of the cache key). */
    static SinkOptions options(String clientId) {
        Map<String, String> m = new HashMap<>();
        m.put("kafka.bootstrap.servers", "127.0.0.1:1");
        m.put("kafka.client.id", clientId);
        m.put("kafka.max.block.ms", "100");  // a send on an open producer gives up quickly
        m.put("topic", "t");
        return SinkOptions.parse(new CaseInsensitiveStringMap(m));
    }

    /**
     * A closed KafkaProducer refuses a send at once; an open one waits up to max.block.ms
     * for metadata that never comes, unless it is closed during that wait (the evictor).
     */
    static boolean closed(KafkaProducer<byte[], byte[]> producer) {
        try {
            producer.send(new ProducerRecord<>("t", new byte[0]));
            return false;
        } catch (IllegalStateException e) {
            return true;
        } catch (KafkaException e) {
            if (String.valueOf(e.getMessage()).contains("closed while send in progress")) {
                return true;
            }
            throw e;
        }
    }

    static long later(long ms) {
        return System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(ms);
    }

    /** The messages of what {@code action} threw and of its causes (empty if it threw nothing). */
    static String refusal(Checks.Check action) throws Exception {
        try {
            action.run();
            return "";
        } catch (RuntimeException e) {
            StringBuilder all = new StringBuilder();
            for (Throwable t = e; t != null; t = t.getCause()) {
                all.append(t.getMessage()).append(" | ");
            }
            return all.toString();
        }
    }

    public static void main(String[] args) throws Exception {
        long timeoutMs = Long.parseLong(args[0]);
        // First: the evictor starts at the first lease and reads the session's settings.
        SparkSession spark = SparkSession.builder().getOrCreate();
        Checks checks = new Checks();
        checks.run("writers_with_the_same_settings_share_one_producer", () -> {
            SinkOptions o = options("share");
            ProducerCache.Entry a = ProducerCache.acquire(o);
            ProducerCache.Entry b = ProducerCache.acquire(options("share"));
            expect(a == b, "two leases, two producers");
            ProducerCache.Entry other = ProducerCache.acquire(options("other"));
            expect(other != a, "other settings, same producer");
            ProducerCache.release(a);
            ProducerCache.release(b);
            ProducerCache.release(other);
        });
        checks.run("idle_producer_kept_until_its_timeout", () -> {
            SinkOptions o = options("kept");
            ProducerCache.Entry a = ProducerCache.acquire(o);
            ProducerCache.release(a);
            ProducerCache.evictIdle(later(50_000), 60_000);
            ProducerCache.Entry again = ProducerCache.acquire(o);
            expect(again == a, "evicted before its timeout");
            expect(!closed(a.producer), "closed before its timeout");
            ProducerCache.release(again);
        });
        checks.run("idle_producer_closed_after_its_timeout", () -> {
            SinkOptions o = options("idle");
            ProducerCache.Entry a = ProducerCache.acquire(o);
            ProducerCache.release(a);
            int evicted = ProducerCache.evictIdle(later(61_000), 60_000);
            expect(evicted >= 1, "nothing evicted");
            expect(closed(a.producer), "evicted but still open");
            ProducerCache.Entry fresh = ProducerCache.acquire(o);
            expect(fresh != a && !closed(fresh.producer), "no fresh producer after eviction");
            ProducerCache.release(fresh);
        });
        checks.run("leased_producer_never_evicted", () -> {
            SinkOptions o = options("leased");
            ProducerCache.Entry a = ProducerCache.acquire(o);
            ProducerCache.Entry b = ProducerCache.acquire(o);
            ProducerCache.release(b);  // one writer done, one still writing
            ProducerCache.evictIdle(later(3_600_000), 1);
            expect(!closed(a.producer), "closed under a live lease");
            ProducerCache.Entry again = ProducerCache.acquire(o);
            expect(again == a, "a leased producer left the cache");
            ProducerCache.release(again);
            ProducerCache.release(a);
        });
        checks.run("retired_producer_closes_with_its_last_lease", () -> {
            SinkOptions o = options("retired");
            ProducerCache.Entry a = ProducerCache.acquire(o);
            ProducerCache.Entry b = ProducerCache.acquire(o);
            ProducerCache.retire(o, a);
            ProducerCache.Entry fresh = ProducerCache.acquire(o);
            expect(fresh != a, "a retired producer handed out again");
            ProducerCache.release(a);
            expect(!closed(b.producer), "closed while another task still sends through it");
            ProducerCache.release(b);
            expect(closed(a.producer), "retired and unused, still open");
            ProducerCache.release(fresh);
        });
        checks.run("evictor_closes_idle_producers_with_the_spark_settings", () -> {
            SinkOptions o = options("evictor");
            ProducerCache.Entry a = ProducerCache.acquire(o);
            ProducerCache.release(a);
            long start = System.nanoTime();
            long bound = later(timeoutMs * 5 + 5_000);
            while (!closed(a.producer) && System.nanoTime() < bound) {
                Thread.sleep(50);
            }
            long tookMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
            expect(closed(a.producer), "still open after " + tookMs + " ms");
            // (from the release, so a few ms earlier than from `start` at most)
            expect(tookMs >= timeoutMs - 50, "closed after " + tookMs + " ms, before the "
                + timeoutMs + " ms timeout");
            System.out.println("evicted after " + tookMs + " ms");
        });
        checks.run("cache_settings_parsed_and_bad_ones_refused_with_the_key", () -> {
            ProducerCache.EvictorSettings defaults = ProducerCache.EvictorSettings.of(new SparkConf(false));
            expect(defaults.timeoutMs() == 600_000 && defaults.intervalMs() == 60_000,
                "Spark's defaults are 10m and 1m, got " + defaults);
            String zero = refusal(() -> ProducerCache.EvictorSettings.of(
                new SparkConf(false).set(ProducerCache.TIMEOUT_KEY, "0s")));
            expect(zero.contains("'" + ProducerCache.TIMEOUT_KEY + "' must be positive, got '0s'"),
                "a zero timeout: " + zero);
            String word = refusal(() -> ProducerCache.EvictorSettings.of(
                new SparkConf(false).set(ProducerCache.EVICTOR_INTERVAL_KEY, "soon")));
            expect(word.contains("'" + ProducerCache.EVICTOR_INTERVAL_KEY
                + "' must be a duration"), "an interval that is no duration: " + word);
        });
        // Last, since it changes this JVM's Spark settings: the evictor already runs (with the
        // good ones), so only the driver-side check at planning can refuse this write.
        checks.run("bad_cache_setting_fails_the_write_when_planned", () -> {
            SparkConf conf = SparkEnv.get().conf();
            conf.set(ProducerCache.TIMEOUT_KEY, "0ms");
            try {
                String refused = refusal(() -> spark.range(1).selectExpr("CAST(id AS STRING) AS value")
                    .write().format("appliance-kafka").mode("append")
                    .option("kafka.bootstrap.servers", "127.0.0.1:1").option("kafka.max.block.ms", "100")
                    .option("topic", "t").save());
                expect(refused.contains("'" + ProducerCache.TIMEOUT_KEY + "' must be positive"),
                    "the write was not refused for the bad timeout: '" + refused + "'");
            } finally {
                conf.set(ProducerCache.TIMEOUT_KEY, timeoutMs + "ms");
            }
        });
        spark.stop();
        checks.finish();
    }
}
