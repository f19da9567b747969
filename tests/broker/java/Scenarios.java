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
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

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

    /** A byte-array producer's settings over {@code base}: every wait bounded by
     * {@code timeoutMs}, no batching. */
    static Properties producer(Properties base, long timeoutMs) {
        String t = Long.toString(timeoutMs);
        Properties pp = new Properties();
        pp.putAll(base);
        pp.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, t);
        pp.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, t);
        pp.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, t);
        pp.put(ProducerConfig.LINGER_MS_CONFIG, "0");
        pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        return pp;
    }

    /** A byte-array consumer's settings over {@code base}: API calls bounded by
     * {@code timeoutMs}, nothing committed on its own. */
    static Properties consumer(Properties base, long timeoutMs) {
        Properties cp = new Properties();
        cp.putAll(base);
        cp.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, Long.toString(timeoutMs));
        cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        return cp;
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
