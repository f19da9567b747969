// Reads partition 0 of each topic named from its start with the Java consumer and prints
// "<topic>=<record count>,<first value>,<last value>" for the tests to compare.
//   ConsumeCheck <bootstrap> <topic>...
import java.time.Duration;
import java.util.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.common.*;
import org.apache.kafka.common.serialization.*;

public class ConsumeCheck {
    public static void main(String[] args) {
        Properties cp = new Properties();
        cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        try (KafkaConsumer<byte[], String> consumer = new KafkaConsumer<>(cp)) {
            for (int i = 1; i < args.length; i++) {
                TopicPartition tp = new TopicPartition(args[i], 0);
                consumer.assign(List.of(tp));
                consumer.seekToBeginning(List.of(tp));
                long end = consumer.endOffsets(List.of(tp)).get(tp);
                List<String> values = new ArrayList<>();
                long deadline = System.currentTimeMillis() + 30_000;
                while (consumer.position(tp) < end && System.currentTimeMillis() < deadline)
                    for (ConsumerRecord<byte[], String> r : consumer.poll(Duration.ofMillis(500)))
                        values.add(r.value());
                System.out.println(args[i] + "=" + values.size() + "," + values.get(0) + ","
                        + values.get(values.size() - 1));
            }
        }
    }
}
