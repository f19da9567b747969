// The embedded broker's ACLs with the real Java kafka-clients: each argument is a scenario
// property file (Scenarios: client properties with the SASL login, plus check.name,
// check.action = produce | fetch | group | delete, check.topic, check.group). Prints
// "NAME=ok", or "NAME=<exception>" naming the first *AuthorizationException in the cause
// chain (else the root cause).
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.*;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.TopicPartition;

public class AclCheck {
    static final long TIMEOUT_MS = 30000;

    public static void main(String[] args) throws Exception {
        Scenarios.run(args, AclCheck::check,
                t -> t.getClass().getSimpleName().endsWith("AuthorizationException"));
    }

    static String check(String name, Properties props) throws Exception {
        String action = (String) props.remove("check.action");
        String topic = (String) props.remove("check.topic");
        String group = (String) props.remove("check.group");
        switch (action) {
            case "produce": return produce(props, topic);
            case "fetch": return fetch(props, topic);
            case "group": return group(props, topic, group);
            case "delete": return delete(props, topic);
            default: return "unknown-action";
        }
    }

    static String produce(Properties base, String topic) throws Exception {
        Properties pp = Scenarios.producer(base, TIMEOUT_MS);
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(pp)) {
            producer.send(new ProducerRecord<>(topic, 0, null,
                    "java-acl".getBytes(StandardCharsets.UTF_8)))
                    .get(TIMEOUT_MS + 5000, TimeUnit.MILLISECONDS);
        }
        return "ok";
    }

    static Properties consumerProps(Properties base) {
        Properties cp = Scenarios.consumer(base, TIMEOUT_MS);
        cp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        return cp;
    }

    static String fetch(Properties base, String topic) throws Exception {
        TopicPartition tp = new TopicPartition(topic, 0);
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(consumerProps(base))) {
            consumer.assign(List.of(tp));
            consumer.seek(tp, 0);
            long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(TIMEOUT_MS);
            while (System.nanoTime() < deadline) {
                if (!consumer.poll(Duration.ofMillis(200)).isEmpty()) return "ok";
            }
        }
        return "no-records";
    }

    static String group(Properties base, String topic, String group) throws Exception {
        Properties cp = consumerProps(base);
        cp.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(cp)) {
            consumer.subscribe(List.of(topic));
            long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(TIMEOUT_MS);
            while (System.nanoTime() < deadline) {
                consumer.poll(Duration.ofMillis(200));
                if (!consumer.assignment().isEmpty()) return "ok";
            }
        }
        return "no-assignment";
    }

    static String delete(Properties base, String topic) throws Exception {
        try (Admin admin = Admin.create(base)) {
            admin.deleteTopics(List.of(topic)).all().get(TIMEOUT_MS, TimeUnit.MILLISECONDS);
        }
        return "ok";
    }
}
