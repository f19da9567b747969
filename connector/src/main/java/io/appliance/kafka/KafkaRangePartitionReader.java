package io.appliance.kafka;

import org.apache.kafka.clients.consumer.ConsumerRecord;

/** Reads a bounded offset range of one partition (batch queries and micro-batches). */
final class KafkaRangePartitionReader extends PartitionRecordReader {
  KafkaRangePartitionReader(KafkaInputPartition split) {
    super(split);
  }

  @Override
  public boolean next() {
    if (offset >= split.untilOffset) {
      return false;
    }
    ConsumerRecord<byte[], byte[]> r = fetcher.next(offset, split.options.pollTimeoutMs());
    if (r == null) {
      long latest = fetcher.latestOffset();
      if (latest <= offset) {
        fetcher.reportDataLoss("Expected offsets up to "
            + split.untilOffset + " of " + tp + " but the partition now ends at " + latest);
        return false;
      }
      fetcher.markBroken();
      throw new IllegalStateException("Timed out after " + split.options.pollTimeoutMs()
          + " ms reading offset " + offset + " of " + tp
          + " (raise kafkaConsumer.pollTimeoutMs if the broker is slow)");
    }
    if (r.offset() >= split.untilOffset) {
      offset = split.untilOffset;
      return false;
    }
    advance(r);
    return true;
  }
}
