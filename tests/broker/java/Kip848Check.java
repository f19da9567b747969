// Two Java consumers with group.protocol=consumer (KIP-848, the broker assigns) on one
// topic: prints what each owns once they share it, what the first owns after the second
// closed, the committed offsets, and the group's type as the Admin client describes it.
//   Kip848Check <bootstrap> <topic> <group>
import java.time.Duration;
import java.util.*;
import java.util.stream.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.common.*;
import org.apache.kafka.common.serialization.*;

public class Kip848Check {
    static KafkaConsumer<byte[], byte[]> member(String bootstrap, String group, String topic) {
        Properties cp = new Properties();
        cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        cp.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        cp.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer");
        cp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(cp);
        c.subscribe(List.of(topic));
        return c;
    }

    static String owned(KafkaConsumer<byte[], byte[]> c) {
        return c.assignment().stream().map(TopicPartition::partition).sorted()
                .map(String::valueOf).collect(Collectors.joining(","));
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], group = args[2];
        int partitions;
        try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
            partitions = admin.describeTopics(List.of(topic)).allTopicNames().get()
                    .get(topic).partitions().size();
        }
        KafkaConsumer<byte[], byte[]> a = member(bootstrap, group, topic);
        KafkaConsumer<byte[], byte[]> b = member(bootstrap, group, topic);
        long deadline = System.currentTimeMillis() + 60_000;
        boolean overlap = false;
        while (System.currentTimeMillis() < deadline) {
            a.poll(Duration.ofMillis(100));
            b.poll(Duration.ofMillis(100));
            Set<TopicPartition> both = new HashSet<>(a.assignment());
            both.retainAll(b.assignment());
            overlap |= !both.isEmpty();
            if (a.assignment().size() + b.assignment().size() == partitions
                    && !a.assignment().isEmpty() && !b.assignment().isEmpty()) break;
        }
        System.out.println("SHARED_A=" + owned(a));
        System.out.println("SHARED_B=" + owned(b));
        System.out.println("OVERLAP=" + overlap);
        Map<TopicPartition, OffsetAndMetadata> commits = new HashMap<>();
        for (TopicPartition tp : a.assignment()) commits.put(tp, new OffsetAndMetadata(3));
        a.commitSync(commits);
        b.close();
        deadline = System.currentTimeMillis() + 60_000;
        while (System.currentTimeMillis() < deadline && a.assignment().size() < partitions)
            a.poll(Duration.ofMillis(100));
        System.out.println("AFTER_LEAVE_A=" + owned(a));
        Set<TopicPartition> all = IntStream.range(0, partitions)
                .mapToObj(p -> new TopicPartition(topic, p)).collect(Collectors.toSet());
        System.out.println("COMMITTED=" + a.committed(all).values().stream()
                .filter(Objects::nonNull).map(o -> String.valueOf(o.offset()))
                .collect(Collectors.joining(",")));
        try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
            ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group))
                    .describedGroups().get(group).get();
            System.out.println("GROUP_TYPE=" + d.type());
            System.out.println("GROUP_MEMBERS=" + d.members().size());
        }
        a.close();
    }
}
