// End-to-end check of the embedded broker with the real Java kafka-clients.
// Prints "KEY=VALUE" result lines that tests/broker/test_java_client.py asserts on.
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.*;
import java.util.concurrent.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.*;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.*;

public class BrokerCheck {
    static final long BASE_TS = 1_700_000_000_000L;

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String topic = args[1];
        int count = Integer.parseInt(args[2]);
        String compression = args[3];
        int partitions = 2;

        Properties ap = new Properties();
        ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(ap)) {
            admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1))).all().get(30, TimeUnit.SECONDS);
            Set<String> names = admin.listTopics().names().get(30, TimeUnit.SECONDS);
            System.out.println("ADMIN_TOPIC_LISTED=" + names.contains(topic));
            TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get(30, TimeUnit.SECONDS).get(topic);
            System.out.println("ADMIN_PARTITIONS=" + d.partitions().size());
        }

        Properties pp = new Properties();
        pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        pp.put(ProducerConfig.ACKS_CONFIG, "all");
        pp.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        pp.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, compression);
        pp.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        long[] offsets = new long[count];
        boolean hwmExact = true;
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(pp)) {
            List<Future<RecordMetadata>> futures = new ArrayList<>();
            for (int i = 0; i < count; i++) {
                ProducerRecord<byte[], byte[]> r = new ProducerRecord<>(topic, i % partitions, BASE_TS + i,
                        ("k" + i).getBytes(StandardCharsets.UTF_8), ("v" + i).getBytes(StandardCharsets.UTF_8));
                r.headers().add("idx", Integer.toString(i).getBytes(StandardCharsets.UTF_8));
                futures.add(producer.send(r));
            }
            producer.flush();
            for (int i = 0; i < count; i++) offsets[i] = futures.get(i).get(30, TimeUnit.SECONDS).offset();
        }
        for (int i = 0; i < count; i++) {
            if (offsets[i] != i / partitions) { hwmExact = false; }
        }
        System.out.println("PRODUCED_OFFSETS_DENSE=" + hwmExact);

        Properties cp = new Properties();
        cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        cp.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "100");
        cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        List<TopicPartition> tps = new ArrayList<>();
        for (int p = 0; p < partitions; p++) tps.add(new TopicPartition(topic, p));
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(cp)) {
            consumer.assign(tps);
            Map<TopicPartition, Long> end = consumer.endOffsets(tps, Duration.ofSeconds(30));
            long total = 0;
            for (long v : end.values()) total += v;
            System.out.println("END_OFFSETS_SUM=" + total);
            Map<TopicPartition, Long> begin = consumer.beginningOffsets(tps, Duration.ofSeconds(30));
            System.out.println("BEGIN_OFFSETS=" + begin.get(tps.get(0)) + "," + begin.get(tps.get(1)));

            // earliest: every record once, in order per partition, fields intact
            consumer.seekToBeginning(tps);
            int got = 0, bad = 0;
            long[] next = new long[partitions];
            long deadline = System.currentTimeMillis() + 60_000;
            while (got < count && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(500))) {
                    int i = (int) (r.offset() * partitions + r.partition());
                    Header h = r.headers().lastHeader("idx");
                    boolean ok = r.offset() == next[r.partition()]
                            && Arrays.equals(r.key(), ("k" + i).getBytes(StandardCharsets.UTF_8))
                            && Arrays.equals(r.value(), ("v" + i).getBytes(StandardCharsets.UTF_8))
                            && h != null && new String(h.value(), StandardCharsets.UTF_8).equals(Integer.toString(i))
                            && r.timestamp() == BASE_TS + i;
                    if (!ok) bad++;
                    next[r.partition()] = r.offset() + 1;
                    got++;
                }
            }
            System.out.println("CONSUMED_EARLIEST=" + got);
            System.out.println("CONSUMED_BAD=" + bad);

            // a given offset
            TopicPartition tp0 = tps.get(0);
            consumer.assign(List.of(tp0));
            long from = Math.max(0, end.get(tp0) - 3);
            consumer.seek(tp0, from);
            long firstSeen = -1;
            int n = 0;
            deadline = System.currentTimeMillis() + 30_000;
            while (n < 3 && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(500))) {
                    if (firstSeen < 0) firstSeen = r.offset();
                    n++;
                }
            }
            System.out.println("SEEK_FIRST_OFFSET=" + firstSeen + " expected=" + from);

            // by timestamp: record i of partition 0 has timestamp BASE_TS + 2*offset
            long target = BASE_TS + 2 * (end.get(tp0) / 2);
            OffsetAndTimestamp ot = consumer.offsetsForTimes(Map.of(tp0, target), Duration.ofSeconds(30)).get(tp0);
            System.out.println("OFFSET_FOR_TIME=" + (ot == null ? -1 : ot.offset()) + " expected=" + (end.get(tp0) / 2));

            // latest: only records produced after the seek arrive
            consumer.seekToEnd(List.of(tp0));
            long pos = consumer.position(tp0, Duration.ofSeconds(30));
            System.out.println("LATEST_POSITION=" + pos);
            try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(pp)) {
                producer.send(new ProducerRecord<>(topic, 0, "late".getBytes(), "late-value".getBytes())).get(30, TimeUnit.SECONDS);
            }
            String lateValue = null;
            long lateOffset = -1;
            deadline = System.currentTimeMillis() + 30_000;
            while (lateValue == null && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(500))) {
                    if (lateValue == null) { lateValue = new String(r.value()); lateOffset = r.offset(); }
                }
            }
            System.out.println("LATEST_VALUE=" + lateValue + " offset=" + lateOffset);
        }
        // Admin.listOffsets: the path Spark's Kafka source uses to plan offsets
        try (Admin admin = Admin.create(ap)) {
            TopicPartition tp1 = new TopicPartition(topic, 1);
            long latest = admin.listOffsets(Map.of(tp1, OffsetSpec.latest())).partitionResult(tp1).get(30, TimeUnit.SECONDS).offset();
            long earliest = admin.listOffsets(Map.of(tp1, OffsetSpec.earliest())).partitionResult(tp1).get(30, TimeUnit.SECONDS).offset();
            long byTime = admin.listOffsets(Map.of(tp1, OffsetSpec.forTimestamp(BASE_TS + 2 * 10 + 1))).partitionResult(tp1).get(30, TimeUnit.SECONDS).offset();
            System.out.println("ADMIN_LIST_OFFSETS=" + earliest + "," + latest + "," + byTime);
        }
        // group.id + assign(): committed offsets are served, so positions resume after a commit
        Properties gp = new Properties();
        gp.putAll(cp);
        gp.put(ConsumerConfig.GROUP_ID_CONFIG, "check-" + topic);
        gp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        TopicPartition tpg = new TopicPartition(topic, 0);
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(gp)) {
            consumer.assign(List.of(tpg));
            System.out.println("GROUP_START_POSITION=" + consumer.position(tpg, Duration.ofSeconds(30)));
            consumer.commitSync(Map.of(tpg, new OffsetAndMetadata(5, "meta")), Duration.ofSeconds(30));
        }
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(gp)) {
            consumer.assign(List.of(tpg));
            System.out.println("GROUP_RESUMED_POSITION=" + consumer.position(tpg, Duration.ofSeconds(30)));
            OffsetAndMetadata om = consumer.committed(Set.of(tpg), Duration.ofSeconds(30)).get(tpg);
            System.out.println("GROUP_COMMITTED=" + om.offset() + "," + om.metadata());
        }
        // subscribe(): the group coordinator assigns it every partition, from the committed offset
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(gp)) {
            consumer.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + 60_000;
            long firstOffset = -1;
            while (firstOffset < 0 && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) {
                    if (r.partition() == tpg.partition() && firstOffset < 0) firstOffset = r.offset();
                }
            }
            System.out.println("SUBSCRIBE_ASSIGNED=" + consumer.assignment().size());
            System.out.println("SUBSCRIBE_FIRST_OFFSET=" + firstOffset);
        }
        System.out.println("DONE=true");
    }
}
