// The Java Admin client's cluster-administration calls against the embedded broker:
// log directories, topics (DescribeTopicPartitions, KIP-966), leader election, partition
// reassignments, offsets by max timestamp (KIP-734), the broker's listener configs and
// client-metrics resources. Prints KEY=VALUE lines for tests/broker/test_admin_cluster.py.
//   ClusterAdminCheck <bootstrap> <topic>
import java.util.*;
import java.util.concurrent.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.*;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.*;

public class ClusterAdminCheck {
    static <T> T get(KafkaFuture<T> f) throws Exception {
        return f.get(30, TimeUnit.SECONDS);
    }

    static String cause(Exception e) {
        Throwable t = e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
        return t.getClass().getSimpleName();
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1];
        Properties ap = new Properties();
        ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(ap)) {
            get(admin.createTopics(List.of(new NewTopic(topic, 3, (short) 1))).all());
            Properties pp = new Properties();
            pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
            pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
            long[] stamps = {1_000L, 9_000L, 4_000L};
            try (KafkaProducer<String, String> producer = new KafkaProducer<>(pp)) {
                for (int i = 0; i < stamps.length; i++)
                    producer.send(new ProducerRecord<>(topic, 0, stamps[i], null, "v" + i)).get();
            }

            Map<Integer, Map<String, LogDirDescription>> dirs =
                    get(admin.describeLogDirs(List.of(0)).allDescriptions());
            LogDirDescription dir = dirs.get(0).values().iterator().next();
            ReplicaInfo replica = dir.replicaInfos().get(new TopicPartition(topic, 0));
            System.out.println("LOG_DIRS=" + dirs.get(0).size() + "," + (replica.size() > 0)
                    + "," + (dir.totalBytes().orElse(-1L) > 0));

            TopicDescription td = get(admin.describeTopics(List.of(topic)).allTopicNames()).get(topic);
            System.out.println("TOPIC=" + td.partitions().size() + "," + td.partitions().get(2).leader().id());

            Set<TopicPartition> tp0 = Set.of(new TopicPartition(topic, 0));
            String elect = "none";
            try {
                get(admin.electLeaders(ElectionType.PREFERRED, tp0).all());
                elect = "elected";
            } catch (Exception e) {
                elect = cause(e);
            }
            System.out.println("ELECT=" + elect);

            System.out.println("REASSIGNING=" + get(admin.listPartitionReassignments().reassignments()).size());
            String moved = "ok";
            try {
                get(admin.alterPartitionReassignments(Map.of(new TopicPartition(topic, 1),
                        Optional.of(new NewPartitionReassignment(List.of(7))))).all());
            } catch (Exception e) {
                moved = cause(e);
            }
            System.out.println("REASSIGN_ELSEWHERE=" + moved);

            ListOffsetsResult.ListOffsetsResultInfo max = get(admin.listOffsets(Map.of(
                    new TopicPartition(topic, 0), OffsetSpec.maxTimestamp())).all())
                    .get(new TopicPartition(topic, 0));
            System.out.println("MAX_TIMESTAMP=" + max.offset() + "," + max.timestamp());

            ConfigResource br = new ConfigResource(ConfigResource.Type.BROKER, "0");
            Config bc = get(admin.describeConfigs(List.of(br)).all()).get(br);
            System.out.println("ADVERTISED=" + bc.get("advertised.listeners").value());
            System.out.println("MIN_ISR=" + bc.get("min.insync.replicas").value());

            System.out.println("CLIENT_METRICS=" + get(admin.listClientMetricsResources().all()).size());
        }
    }
}
