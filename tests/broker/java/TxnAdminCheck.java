// The Java Admin client's transaction calls (KIP-664: what kafka-transactions.sh uses)
// against an open, a committed and an aborted transaction: listTransactions (all, by
// state, by producer id, by duration), describeTransactions, describeProducers. Prints
// KEY=VALUE lines that tests/broker/test_txn_admin.py asserts on.
//   TxnAdminCheck <bootstrap> <topic>
import java.util.*;
import java.util.concurrent.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.*;
import org.apache.kafka.common.serialization.StringSerializer;

public class TxnAdminCheck {
    static <T> T get(KafkaFuture<T> f) throws Exception {
        return f.get(30, TimeUnit.SECONDS);
    }

    static KafkaProducer<String, String> producer(String bootstrap, String txnId) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        KafkaProducer<String, String> producer = new KafkaProducer<>(p);
        producer.initTransactions();
        return producer;
    }

    // ids of ours among the listed, sorted, as id:STATE
    static String listed(Collection<TransactionListing> all, String prefix) {
        List<String> out = new ArrayList<>();
        for (TransactionListing l : all)
            if (l.transactionalId().startsWith(prefix)) out.add(l.transactionalId().substring(prefix.length()) + ":" + l.state());
        Collections.sort(out);
        return String.join(",", out);
    }

    static String cause(Exception e) {
        Throwable t = e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
        return t.getClass().getSimpleName();
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1];
        String prefix = topic + "-";
        Properties ap = new Properties();
        ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(ap)) {
            get(admin.createTopics(List.of(new NewTopic(topic, 2, (short) 1))).all());
            KafkaProducer<String, String> committed = producer(bootstrap, prefix + "committed");
            committed.beginTransaction();
            for (int i = 0; i < 3; i++) committed.send(new ProducerRecord<>(topic, 0, null, "c" + i));
            committed.commitTransaction();
            KafkaProducer<String, String> aborted = producer(bootstrap, prefix + "aborted");
            aborted.beginTransaction();
            aborted.send(new ProducerRecord<>(topic, 1, null, "a")).get();
            aborted.abortTransaction();
            KafkaProducer<String, String> open = producer(bootstrap, prefix + "open");
            open.beginTransaction();
            open.send(new ProducerRecord<>(topic, 0, null, "o0")).get();
            open.send(new ProducerRecord<>(topic, 1, null, "o1")).get();

            System.out.println("LISTED=" + listed(get(admin.listTransactions().all()), prefix));
            System.out.println("LISTED_ONGOING=" + listed(get(admin.listTransactions(
                    new ListTransactionsOptions().filterStates(List.of(TransactionState.ONGOING))).all()), prefix));
            Map<String, TransactionDescription> described = get(admin.describeTransactions(
                    List.of(prefix + "open", prefix + "committed", prefix + "aborted")).all());
            long committedPid = described.get(prefix + "committed").producerId();
            System.out.println("LISTED_BY_PID=" + listed(get(admin.listTransactions(
                    new ListTransactionsOptions().filterProducerIds(List.of(committedPid))).all()), prefix));
            Thread.sleep(1500);
            System.out.println("LISTED_OLDER_THAN_1S=" + listed(get(admin.listTransactions(
                    new ListTransactionsOptions().filterOnDuration(1000)).all()), prefix));
            System.out.println("LISTED_OLDER_THAN_1H=" + listed(get(admin.listTransactions(
                    new ListTransactionsOptions().filterOnDuration(3_600_000)).all()), prefix));

            for (String name : List.of("open", "committed", "aborted")) {
                TransactionDescription d = described.get(prefix + name);
                List<String> parts = new ArrayList<>();
                for (TopicPartition tp : d.topicPartitions()) parts.add(tp.toString());
                Collections.sort(parts);
                System.out.println("DESCRIBED_" + name.toUpperCase() + "=" + d.state() + "," + d.producerEpoch() + ","
                        + d.transactionTimeoutMs() + "," + d.transactionStartTimeMs().isPresent() + ","
                        + String.join("+", parts) + "," + d.coordinatorId());
            }
            String unknown = "none";
            try {
                get(admin.describeTransactions(List.of(prefix + "never")).all());
            } catch (Exception e) {
                unknown = cause(e);
            }
            System.out.println("DESCRIBED_UNKNOWN=" + unknown);

            long openPid = described.get(prefix + "open").producerId();
            long abortedPid = described.get(prefix + "aborted").producerId();
            Map<Long, String> names = Map.of(openPid, "open", committedPid, "committed", abortedPid, "aborted");
            for (int p = 0; p < 2; p++) {
                TopicPartition tp = new TopicPartition(topic, p);
                List<String> rows = new ArrayList<>();
                for (ProducerState s : get(admin.describeProducers(List.of(tp)).partitionResult(tp)).activeProducers())
                    rows.add(names.getOrDefault(s.producerId(), "other") + ":" + s.producerEpoch() + ":" + s.lastSequence()
                            + ":" + (s.lastTimestamp() > 0) + ":" + s.coordinatorEpoch().orElse(-1) + ":"
                            + s.currentTransactionStartOffset().orElse(-1));
                Collections.sort(rows);
                System.out.println("PRODUCERS_" + p + "=" + String.join(",", rows));
            }
            open.commitTransaction();
            System.out.println("AFTER_COMMIT=" + get(admin.describeTransactions(List.of(prefix + "open"))
                    .description(prefix + "open")).state());
            open.close();
            committed.close();
            aborted.close();
        }
    }
}
