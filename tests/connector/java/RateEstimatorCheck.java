// Unit checks of the adaptive read limit's PID rate estimator (no Spark, no broker).
// Each check prints PASS or FAIL with its name (Checks.java); exits 1 if any failed.
// tests/connector/test_connector_adaptive.py asserts one line per check.
package io.appliance.kafka;

import static io.appliance.kafka.Checks.expect;


public class RateEstimatorCheck {
    static final long TARGET_MS = 1000;

    static RateEstimator.Settings settings(double kp, double ki, double kd, double min, double initial) {
        return new RateEstimator.Settings(TARGET_MS, kp, ki, kd, min, initial);
    }

    static RateEstimator dstreamDefaults() {
        return new RateEstimator(settings(1.0, 0.2, 0.0, 100, 1000));
    }

    static void near(double got, double want, double tol, String what) {
        expect(Math.abs(got - want) <= tol, what + ": expected " + want + " +- " + tol + ", got " + got);
    }

    /** A simulated query: fixed cost per batch plus a cost per record (its true capacity). */
    static final class Query {
        final long overheadMs;
        final double recordsPerMs;
        Query(long overheadMs, double recordsPerSecond) {
            this.overheadMs = overheadMs;
            this.recordsPerMs = recordsPerSecond / 1000.0;
        }
        long durationMs(long records) {
            return overheadMs + Math.round(records / recordsPerMs);
        }
    }

    public static void main(String[] args) {
        Checks checks = new Checks();
        checks.run("initial_limit_is_initial_rate_times_target", () -> {
            RateEstimator e = dstreamDefaults();
            expect(e.offsetsPerTrigger() == 1000, "limit " + e.offsetsPerTrigger());
        });
        checks.run("initial_rate_never_below_min_rate", () -> {
            RateEstimator e = new RateEstimator(settings(1, 0.2, 0, 500, 10));
            near(e.rate(), 500, 1e-9, "rate");
        });
        checks.run("proportional_step_moves_rate_to_processing_rate", () -> {
            // 1000 records in 500 ms: processed at 2000/s, on target: no overrun term
            RateEstimator e = dstreamDefaults();
            near(e.update(10_000, 1000, 500), 2000, 1e-6, "rate");
        });
        checks.run("overrun_lowers_rate_below_processing_rate", () -> {
            // 4000 records in 2000 ms: 2000/s, 1000 ms over the 1000 ms target:
            // 1000 - (1000-2000) - 0.2 * 1000*2000/1000 = 2000 - 400
            RateEstimator e = new RateEstimator(settings(1.0, 0.2, 0.0, 100, 1000));
            near(e.update(10_000, 4000, 2000), 1600, 1e-6, "rate");
        });
        checks.run("derivative_term_uses_error_change_per_second", () -> {
            RateEstimator e = new RateEstimator(settings(0.0, 0.0, 0.5, 1, 1000));
            e.update(1_000, 500, 1000);   // p=500, error=+500, kp=0: rate stays 1000
            // p=250 one second later: error=+750, dError=+250/s, rate = 1000 - 0.5*250
            near(e.update(2_000, 250, 1000), 875, 1e-6, "rate");
        });
        checks.run("min_rate_floor", () -> {
            RateEstimator e = dstreamDefaults();
            near(e.update(1_000, 10, 60_000), 100, 1e-9, "rate"); // a crawl: clamp to 100/s
            expect(e.offsetsPerTrigger() == 100, "limit " + e.offsetsPerTrigger());
        });
        checks.run("empty_or_unmeasured_batches_leave_rate_alone", () -> {
            RateEstimator e = dstreamDefaults();
            near(e.update(1_000, 0, 500), 1000, 0, "after empty batch");
            near(e.update(2_000, 100, 0), 1000, 0, "after zero duration");
            near(e.update(3_000, -5, 10), 1000, 0, "after negative count");
        });
        checks.run("converges_to_target_duration_on_backlog", () -> {
            // 150 ms per batch + 20,000 records/s: the limit that fills 1 s is 17,000
            Query q = new Query(150, 20_000);
            RateEstimator e = dstreamDefaults();
            long now = 0;
            long d = 0;
            for (int i = 0; i < 40; i++) {
                long n = e.offsetsPerTrigger();   // a backlog: every batch is full
                d = q.durationMs(n);
                now += d;
                e.update(now, n, d);
            }
            expect(d >= 700 && d <= 1300, "batch duration after 40 batches: " + d + " ms");
            expect(e.rate() <= 20_000, "rate above the query's capacity: " + e.rate());
        });
        checks.run("ramps_up_from_min_rate_within_a_few_batches", () -> {
            Query q = new Query(100, 50_000);
            RateEstimator e = new RateEstimator(settings(1.0, 0.2, 0.0, 100, 100));
            long now = 0;
            int batches = 0;
            while (e.rate() < 20_000 && batches < 20) {
                long n = e.offsetsPerTrigger();
                long d = q.durationMs(n);
                now += d;
                e.update(now, n, d);
                batches++;
            }
            expect(e.rate() >= 20_000, "rate after 20 batches: " + e.rate());
            expect(batches <= 8, "needed " + batches + " batches to ramp up");
        });
        checks.run("slowdown_shrinks_batches", () -> {
            // the query becomes 4x slower (e.g. the machine is shared): batches shrink back
            Query fast = new Query(100, 40_000);
            Query slow = new Query(100, 10_000);
            RateEstimator e = dstreamDefaults();
            long now = 0;
            for (int i = 0; i < 30; i++) {
                long n = e.offsetsPerTrigger();
                long d = fast.durationMs(n);
                now += d;
                e.update(now, n, d);
            }
            long before = e.offsetsPerTrigger();
            long d = 0;
            for (int i = 0; i < 30; i++) {
                long n = e.offsetsPerTrigger();
                d = slow.durationMs(n);
                now += d;
                e.update(now, n, d);
            }
            expect(e.offsetsPerTrigger() < before / 2, "limit " + before + " -> " + e.offsetsPerTrigger());
            expect(d <= 1300, "batch duration after slowdown: " + d + " ms");
        });
        checks.run("non_finite_result_falls_back_to_min_rate", () -> {
            RateEstimator e = new RateEstimator(settings(Double.MAX_VALUE, Double.MAX_VALUE, 0, 100, 1000));
            e.update(1_000, Long.MAX_VALUE / 2, 1);
            expect(e.rate() >= 100 && Double.isFinite(e.rate()), "rate " + e.rate());
        });
        checks.finish();
    }
}
