package io.appliance.rpc;

import java.io.Serializable;

import org.apache.spark.SparkEnv;
import org.apache.spark.rpc.RpcAddress;
import org.apache.spark.rpc.RpcEndpointRef;
import scala.reflect.ClassTag;
import scala.reflect.ClassTag$;

/**
 * Where a {@link DriverEndpoint} listens: its name and the driver's RPC host and port. Travels
 * with a plan or a split (serialized) to the executors, which ask through {@link #ask}.
 */
public final class EndpointAddress implements Serializable {
  private static final long serialVersionUID = 1L;
  private static final ClassTag<Object> ANY = ClassTag$.MODULE$.apply(Object.class);

  public final String name;
  /** Null where the driver had no RPC address (nothing remote can reach it). */
  public final String host;
  public final int port;
  private transient volatile RpcEndpointRef ref;

  EndpointAddress(String name, String host, int port) {
    this.name = name;
    this.host = host;
    this.port = port;
  }

  /** Whether executors in other JVMs can reach the endpoint. */
  public boolean reachable() {
    return host != null;
  }

  private RpcEndpointRef ref() {
    RpcEndpointRef r = ref;
    if (r == null) {
      r = SparkEnv.get().rpcEnv().setupEndpointRef(RpcAddress.apply(host, port), name);
      ref = r;
    }
    return r;
  }

  /** Asks and waits for the reply (Spark's default RPC timeout); forgets the connection on a
   * failure, so the next ask resolves the endpoint again. */
  public Object ask(Object message) {
    try {
      return ref().askSync(message, ANY);
    } catch (RuntimeException e) {
      ref = null;
      throw e;
    }
  }

  /** A one-way message (best effort). */
  public void send(Object message) {
    try {
      ref().send(message);
    } catch (RuntimeException e) {
      ref = null;
      throw e;
    }
  }
}
