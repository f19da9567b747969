// The harness of the connector's Java checks (plain programs: no JUnit here). Each check
// prints "PASS <name>" or "FAIL <name>: <why>" (with its stack trace); finish() prints the
// verdict line tests/connector/connector_helpers.py waits for and exits 1 if any failed.
package io.appliance.kafka;

import java.util.ArrayList;
import java.util.List;

final class Checks {
    interface Check { void run() throws Exception; }

    private final List<String> failed = new ArrayList<>();

    static void expect(boolean ok, String why) {
        if (!ok) throw new AssertionError(why);
    }

    void run(String name, Check check) {
        try {
            check.run();
            System.out.println("PASS " + name);
        } catch (Throwable t) {
            failed.add(name);
            System.out.println("FAIL " + name + ": " + t);
            t.printStackTrace(System.out);
        }
    }

    void finish() {
        System.out.println(failed.isEmpty() ? "ALL PASSED" : "FAILED " + failed);
        System.exit(failed.isEmpty() ? 0 : 1);
    }
}
