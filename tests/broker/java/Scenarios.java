// The scenario files the broker's Java checks read: each argument is a property file of
// Kafka client settings plus the check's own "check.*" keys (credentials live in the
// files, never on the command line). For each file the check runs with what is left once
// check.name is taken, and "NAME=<its result>" is printed; a check that throws prints
// "NAME=<the simple name of the first telling exception in the cause chain, else of the
// root cause>".
import java.io.FileInputStream;
import java.io.IOException;
import java.util.Properties;
import java.util.function.Predicate;

final class Scenarios {
    interface Check {
        String run(String name, Properties props) throws Exception;
    }

    private Scenarios() {}

    static void run(String[] files, Check check, Predicate<Throwable> telling)
            throws IOException {
        for (String file : files) {
            Properties props = new Properties();
            try (FileInputStream in = new FileInputStream(file)) { props.load(in); }
            String name = (String) props.remove("check.name");
            String result;
            try {
                result = check.run(name, props);
            } catch (Exception e) {
                result = describe(e, telling);
            }
            System.out.println(name + "=" + result);
        }
    }

    static String describe(Throwable e, Predicate<Throwable> telling) {
        Throwable root = e;
        for (Throwable t = e; t != null; t = t.getCause()) {
            if (telling.test(t)) return t.getClass().getSimpleName();
            root = t;
        }
        return root.getClass().getSimpleName();
    }
}
