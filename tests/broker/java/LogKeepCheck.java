// What the log keeps, through the Java client (issue 53: compaction, the log budget).
//   LogKeepCheck <bootstrap> read <topic>
//     reads partition 0 from its start; prints "RECORDS=<n>", "OFFSETS_GROW=<bool>" and
//     per key "KEY.<key>=<offset>,<value or NULL>,<times seen>"
//   LogKeepCheck <bootstrap> produce <topic> <count> <value bytes> <delivery timeout ms>
//     sends <count> records one at a time (acks=all, no retries left to chance: the
//     producer's own), prints "ACKED=<n>", "FIRST_ACKED=<offset>", "FAILED=<n>" and
//     "ERROR=<simple name of the first failure's exception>"
import java.time.Duration;
import java.util.*;
import java.util.concurrent.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.*;
import org.apache.kafka.common.serialization.*;

public class LogKeepCheck {
    public static void main(String[] args) throws Exception {
        if (args[1].equals("read")) read(args[0], args[2]);
        else produce(args[0], args[2], Integer.parseInt(args[3]), Integer.parseInt(args[4]),
                     Integer.parseInt(args[5]));
    }

    static void read(String bootstrap, String topic) {
        Properties cp = new Properties();
        cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(cp)) {
            TopicPartition tp = new TopicPartition(topic, 0);
            consumer.assign(List.of(tp));
            consumer.seekToBeginning(List.of(tp));
            long end = consumer.endOffsets(List.of(tp)).get(tp);
            Map<String, String> newest = new TreeMap<>();
            Map<String, Integer> seen = new HashMap<>();
            long last = -1;
            boolean grow = true;
            int n = 0;
            long deadline = System.currentTimeMillis() + 30_000;
            while (consumer.position(tp) < end && System.currentTimeMillis() < deadline)
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500))) {
                    n++;
                    grow &= r.offset() > last;
                    last = r.offset();
                    String v = r.value() == null ? "NULL" : r.value().substring(0, 3);
                    newest.put(r.key(), r.offset() + "," + v);
                    seen.merge(r.key(), 1, Integer::sum);
                }
            System.out.println("RECORDS=" + n);
            System.out.println("OFFSETS_GROW=" + grow);
            for (Map.Entry<String, String> e : newest.entrySet())
                System.out.println("KEY." + e.getKey() + "=" + e.getValue() + "," + seen.get(e.getKey()));
        }
    }

    static void produce(String bootstrap, String topic, int count, int valueBytes, int timeoutMs)
            throws Exception {
        Properties pp = new Properties();
        pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        pp.put(ProducerConfig.ACKS_CONFIG, "all");
        pp.put(ProducerConfig.LINGER_MS_CONFIG, "0");
        pp.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, String.valueOf(timeoutMs));
        pp.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, String.valueOf(timeoutMs));
        pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        int acked = 0, failed = 0;
        long firstAcked = -1;
        String error = "none";
        byte[] value = new byte[valueBytes];
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(pp)) {
            for (int i = 0; i < count; i++) {
                try {
                    RecordMetadata m = producer.send(new ProducerRecord<>(topic, 0, null, value))
                            .get(timeoutMs * 2L, TimeUnit.MILLISECONDS);
                    if (firstAcked < 0) firstAcked = m.offset();
                    acked++;
                } catch (ExecutionException e) {
                    if (failed++ == 0) error = e.getCause().getClass().getSimpleName();
                    if (failed >= 3) break;  // the log stays full: enough seen
                }
            }
        }
        System.out.println("ACKED=" + acked);
        System.out.println("FIRST_ACKED=" + firstAcked);
        System.out.println("FAILED=" + failed);
        System.out.println("ERROR=" + error);
    }
}
