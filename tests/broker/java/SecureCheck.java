// The embedded broker's TLS/SASL listener with the real Java kafka-clients.
// Arguments: scenario property files (Scenarios: client properties plus check.name,
// check.topic and check.timeout.ms). For each scenario it produces one record and reads it
// back, then prints "NAME=ok", or "NAME=<exception>" naming the first authentication
// exception in the cause chain (else the root cause).
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.*;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.AuthenticationException;

public class SecureCheck {
    public static void main(String[] args) throws Exception {
        Scenarios.run(args, SecureCheck::check, t -> t instanceof AuthenticationException);
    }

    static String check(String name, Properties props) throws Exception {
        String topic = (String) props.remove("check.topic");
        long timeoutMs = Long.parseLong((String) props.remove("check.timeout.ms"));
        return roundTrip(props, topic, name, timeoutMs);
    }

    static String roundTrip(Properties base, String topic, String name, long timeoutMs)
            throws Exception {
        Properties pp = Scenarios.producer(base, timeoutMs);
        byte[] value = ("java-" + name).getBytes(StandardCharsets.UTF_8);
        long offset;
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(pp)) {
            offset = producer.send(new ProducerRecord<>(topic, 0, null, value))
                    .get(timeoutMs + 5000, TimeUnit.MILLISECONDS).offset();
        }
        Properties cp = Scenarios.consumer(base, timeoutMs);
        TopicPartition tp = new TopicPartition(topic, 0);
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(cp)) {
            consumer.assign(List.of(tp));
            consumer.seek(tp, offset);
            long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
            while (System.nanoTime() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) {
                    if (r.offset() == offset) {
                        return Arrays.equals(r.value(), value) ? "ok" : "wrong-value";
                    }
                }
            }
        }
        return "not-consumed";
    }
}
