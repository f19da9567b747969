import java.nio.ByteBuffer;
import java.util.concurrent.locks.LockSupport;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;

/**
 * The broker benches' open-loop sender: one record every 1/rate seconds to partition 0,
 * each carrying its sequence number (int at 0) and its send time (System.nanoTime, long at
 * 4) for the consumer side to time. One primer record (sequence -1) is acknowledged first,
 * so connecting and InitProducerId happen before the clock starts.
 */
final class PacedSend {
    private PacedSend() {}

    /** Sends {@code total} records at {@code rate}/s; returns how many left over 1 ms late. */
    static long send(KafkaProducer<byte[], byte[]> producer, String topic, int rate, int total)
            throws Exception {
        producer.send(new ProducerRecord<>(topic, 0, null,
                ByteBuffer.allocate(12).putInt(0, -1).array())).get();
        long behind = 0;
        long interval = (long) (1e9 / rate);
        long start = System.nanoTime();
        for (int i = 0; i < total; i++) {
            long due = start + i * interval;
            long now;
            // park, never spin: on a 2-core box a spinning pacer would steal the broker's CPU
            while ((now = System.nanoTime()) < due) LockSupport.parkNanos(due - now);
            if (now - due > 1_000_000) behind++;
            ByteBuffer b = ByteBuffer.allocate(64);
            b.putInt(0, i);
            b.putLong(4, System.nanoTime());
            producer.send(new ProducerRecord<>(topic, 0, null, b.array()));
        }
        producer.flush();
        return behind;
    }
}
