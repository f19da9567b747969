// The Java Admin client's group, config, records and cluster calls against the embedded
// broker, and a transactional producer read back read_committed. Prints KEY=VALUE lines
// that tests/broker/test_admin_clients.py asserts on.
//   AdminCheck <bootstrap> <topic> <group>
import java.time.Duration;
import java.util.*;
import java.util.concurrent.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.*;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.*;

public class AdminCheck {
    static <T> T get(KafkaFuture<T> f) throws Exception {
        return f.get(30, TimeUnit.SECONDS);
    }

    static String cause(Exception e) {
        Throwable t = e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
        return t.getClass().getSimpleName();
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], group = args[2];
        Properties ap = new Properties();
        ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(ap)) {
            get(admin.createTopics(List.of(new NewTopic(topic, 2, (short) 1))).all());
            DescribeClusterResult cluster = admin.describeCluster();
            System.out.println("CLUSTER=" + get(cluster.clusterId()) + "," + get(cluster.nodes()).size()
                    + "," + get(cluster.controller()).id());

            ConfigResource tr = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            get(admin.incrementalAlterConfigs(Map.of(tr, List.of(
                    new AlterConfigOp(new ConfigEntry("retention.ms", "7200000"), AlterConfigOp.OpType.SET),
                    new AlterConfigOp(new ConfigEntry("max.message.bytes", "500000"), AlterConfigOp.OpType.SET)))).all());
            Config tc = get(admin.describeConfigs(List.of(tr)).all()).get(tr);
            System.out.println("TOPIC_RETENTION_MS=" + tc.get("retention.ms").value() + "," + tc.get("retention.ms").source());
            System.out.println("TOPIC_MAX_MESSAGE_BYTES=" + tc.get("max.message.bytes").value());
            System.out.println("TOPIC_CLEANUP_POLICY=" + tc.get("cleanup.policy").value() + "," + tc.get("cleanup.policy").isReadOnly());
            String badAlter = "none";
            try {
                get(admin.incrementalAlterConfigs(Map.of(tr, List.of(new AlterConfigOp(
                        new ConfigEntry("cleanup.policy", "shrink"), AlterConfigOp.OpType.SET)))).all());
            } catch (Exception e) {
                badAlter = cause(e);
            }
            System.out.println("BAD_POLICY_REFUSED=" + badAlter);
            ConfigResource br = new ConfigResource(ConfigResource.Type.BROKER, "0");
            Config bc = get(admin.describeConfigs(List.of(br)).all()).get(br);
            System.out.println("BROKER_NUM_PARTITIONS=" + bc.get("num.partitions").value() + "," + bc.get("num.partitions").isReadOnly());

            Properties pp = new Properties();
            pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
            pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
            try (KafkaProducer<String, String> producer = new KafkaProducer<>(pp)) {
                for (int i = 0; i < 20; i++) producer.send(new ProducerRecord<>(topic, 0, null, "v" + i)).get();
            }
            TopicPartition tp0 = new TopicPartition(topic, 0);
            DeletedRecords deleted = get(admin.deleteRecords(Map.of(tp0, RecordsToDelete.beforeOffset(8))).lowWatermarks().get(tp0));
            long earliest = get(admin.listOffsets(Map.of(tp0, OffsetSpec.earliest())).partitionResult(tp0)).offset();
            System.out.println("DELETE_RECORDS=" + deleted.lowWatermark() + "," + earliest);

            // a group: two members share the topic, then an admin looks at it
            Properties cp = new Properties();
            cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            cp.put(ConsumerConfig.GROUP_ID_CONFIG, group);
            cp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
            cp.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "6000");
            cp.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "1000");
            cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
            cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
            KafkaConsumer<String, String> c1 = new KafkaConsumer<>(cp);
            KafkaConsumer<String, String> c2 = new KafkaConsumer<>(cp);
            c1.subscribe(List.of(topic));
            c2.subscribe(List.of(topic));
            int got = 0;
            long deadline = System.currentTimeMillis() + 60_000;
            while ((c1.assignment().size() + c2.assignment().size() < 2 || c1.assignment().isEmpty()
                    || c2.assignment().isEmpty() || got < 12) && System.currentTimeMillis() < deadline) {
                got += c1.poll(Duration.ofMillis(100)).count();
                got += c2.poll(Duration.ofMillis(100)).count();
            }
            c1.commitSync();
            c2.commitSync();
            System.out.println("CONSUMED=" + got);
            Collection<ConsumerGroupListing> listed = get(admin.listConsumerGroups().all());
            String state = "absent";
            for (ConsumerGroupListing l : listed) if (l.groupId().equals(group)) state = String.valueOf(l.state().orElse(null));
            System.out.println("LISTED_STATE=" + state);
            ConsumerGroupDescription d = get(admin.describeConsumerGroups(List.of(group)).all()).get(group);
            int assigned = 0;
            for (MemberDescription m : d.members()) assigned += m.assignment().topicPartitions().size();
            System.out.println("DESCRIBED=" + d.state() + "," + d.members().size() + "," + assigned + "," + d.partitionAssignor());
            Map<TopicPartition, OffsetAndMetadata> offsets = get(admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata());
            System.out.println("GROUP_OFFSETS=" + offsets.get(tp0).offset() + "," + offsets.get(new TopicPartition(topic, 1)));
            String notEmpty = "none";
            try {
                get(admin.deleteConsumerGroups(List.of(group)).all());
            } catch (Exception e) {
                notEmpty = cause(e);
            }
            System.out.println("DELETE_ACTIVE=" + notEmpty);
            c1.close();
            c2.close();
            get(admin.deleteConsumerGroupOffsets(group, Set.of(tp0)).all());
            Map<TopicPartition, OffsetAndMetadata> after = get(admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata());
            System.out.println("OFFSET_DELETED=" + !after.containsKey(tp0));
            get(admin.deleteConsumerGroups(List.of(group)).all());
            boolean gone = true;
            for (ConsumerGroupListing l : get(admin.listConsumerGroups().all())) if (l.groupId().equals(group)) gone = false;
            System.out.println("GROUP_DELETED=" + gone);
        }

        // transactions: one committed, one aborted; a read_committed consumer sees the first
        String txnTopic = topic + "-txn";
        Properties tp = new Properties();
        tp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        tp.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, "admin-check-tx");
        tp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        tp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        long started = System.nanoTime();
        String txnError = "none";
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(tp)) {
            producer.initTransactions();
            producer.beginTransaction();
            for (int i = 0; i < 3; i++) producer.send(new ProducerRecord<>(txnTopic, 0, null, "c" + i));
            producer.commitTransaction();
            producer.beginTransaction();
            producer.send(new ProducerRecord<>(txnTopic, 0, null, "a"));
            producer.abortTransaction();
        } catch (Exception e) {
            txnError = e.getClass().getSimpleName();
        }
        System.out.println("TXN_ERROR=" + txnError);
        System.out.println("TXN_SECONDS=" + (System.nanoTime() - started) / 1e9);
        Properties rc = new Properties();
        rc.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        rc.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        rc.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        rc.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        List<String> committed = new ArrayList<>();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(rc)) {
            TopicPartition tpart = new TopicPartition(txnTopic, 0);
            consumer.assign(List.of(tpart));
            consumer.seekToBeginning(List.of(tpart));
            long end = System.currentTimeMillis() + 15000;
            while (System.currentTimeMillis() < end && consumer.position(tpart) < consumer.endOffsets(List.of(tpart)).get(tpart)) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) committed.add(r.value());
            }
        }
        System.out.println("TXN_COMMITTED=" + String.join(",", committed));
        System.out.println("DONE=true");
    }
}
