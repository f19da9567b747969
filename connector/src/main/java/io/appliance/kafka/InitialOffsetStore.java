package io.appliance.kafka;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.function.Supplier;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

/**
 * Remembers the resolved starting offsets in the source's checkpoint directory so that a
 * query restarted before its first batch commits does not re-resolve "latest" and skip data.
 * The file system is opened with the session's Hadoop configuration (spark.hadoop.* and the
 * session's SQL settings, as Spark's own checkpoint logs are), so a checkpoint on S3 or HDFS
 * with credentials or a custom file system works the same here as for Spark's offset log.
 */
final class InitialOffsetStore {
  static final String FILE = "appliance-kafka-initial-offsets.json";

  private InitialOffsetStore() {}

  static KafkaSourceOffset getOrCreate(Configuration hadoopConf, String checkpointLocation,
      Supplier<KafkaSourceOffset> resolve) {
    Path path = new Path(checkpointLocation, FILE);
    try {
      FileSystem fs = path.getFileSystem(hadoopConf);
      if (fs.exists(path)) {
        try (InputStream in = fs.open(path)) {
          return KafkaSourceOffset.fromJson(new String(in.readAllBytes(), StandardCharsets.UTF_8));
        }
      }
      KafkaSourceOffset offset = resolve.get();
      fs.mkdirs(path.getParent());
      Path tmp = new Path(checkpointLocation, "." + FILE + ".tmp");
      try (OutputStream out = fs.create(tmp, true)) {
        out.write(offset.json().getBytes(StandardCharsets.UTF_8));
      }
      if (!fs.rename(tmp, path)) {
        throw new IOException("rename " + tmp + " -> " + path + " failed");
      }
      return offset;
    } catch (IOException e) {
      throw new IllegalStateException("cannot persist initial offsets under " + checkpointLocation, e);
    }
  }
}
