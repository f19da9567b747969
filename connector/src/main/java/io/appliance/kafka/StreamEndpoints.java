package io.appliance.kafka;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Function;

import io.appliance.rpc.DriverEndpoint;
import org.apache.spark.rpc.RpcEnv;

/**
 * The driver-side endpoints of one kind ({@link BatchEnd}'s, {@link ProgressMarks}'), one per
 * running real-time stream: by name, for a reader in the driver's JVM (a local master) that
 * uses its endpoint directly instead of over RPC, and by checkpoint location, for the
 * driver's callers, who know a query by its checkpoint.
 */
final class StreamEndpoints<E extends DriverEndpoint> {
  private final Map<String, E> byName = new ConcurrentHashMap<>();
  private final Map<String, String> locations = new ConcurrentHashMap<>();

  /**
   * A new endpoint ({@code make} on this JVM's Spark RPC env) for the stream checkpointed at
   * {@code location}, registered; null where no Spark RPC runs.
   */
  E open(Function<RpcEnv, E> make, String location) {
    RpcEnv env = DriverEndpoint.localEnv();
    if (env == null) {
      return null;
    }
    E endpoint = make.apply(env);
    locations.put(endpoint.name(), normalize(location));
    byName.put(endpoint.name(), endpoint);
    return endpoint;
  }

  /** Forgets it (its stream stopped). */
  void remove(E endpoint) {
    byName.remove(endpoint.name());
    locations.remove(endpoint.name());
  }

  /** The endpoint called {@code name} if it lives in this JVM, else null. */
  E local(String name) {
    return byName.get(name);
  }

  /** The endpoints of the streams checkpointed under {@code checkpointDir}. */
  List<E> under(String checkpointDir) {
    String prefix = normalize(checkpointDir);
    List<E> out = new ArrayList<>();
    byName.forEach((name, e) -> {
      String location = locations.get(name);
      if (location != null && location.startsWith(prefix)) {
        out.add(e);
      }
    });
    return out;
  }

  /** A checkpoint location as a path prefix: no {@code file:} scheme, one trailing slash. */
  static String normalize(String location) {
    String s = location.startsWith("file:") ? location.substring("file:".length()) : location;
    while (s.startsWith("//")) {
      s = s.substring(1);
    }
    return s.endsWith("/") ? s : s + "/";
  }
}
