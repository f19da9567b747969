// Prints the config names of the Java kafka-clients on the class path, one a line:
// "version<TAB>3.9.1", then "<client><TAB><name><TAB><type>" for the producer, the consumer
// and the admin client, sorted. Run by scripts/kafka_config_names.py (the single-file
// source launcher: `java -cp kafka-clients.jar:slf4j-api.jar KafkaConfigNames.java`).

import java.util.Map;
import java.util.TreeMap;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.common.utils.AppInfoParser;

public class KafkaConfigNames {
    public static void main(String[] args) {
        System.out.println("version\t" + AppInfoParser.getVersion());
        print("producer", ProducerConfig.configDef());
        print("consumer", ConsumerConfig.configDef());
        print("admin", AdminClientConfig.configDef());
    }

    private static void print(String client, ConfigDef def) {
        for (Map.Entry<String, ConfigDef.ConfigKey> entry
                : new TreeMap<>(def.configKeys()).entrySet()) {
            System.out.println(client + "\t" + entry.getKey() + "\t" + entry.getValue().type);
        }
    }
}
