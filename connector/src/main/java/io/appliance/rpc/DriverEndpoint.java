package io.appliance.rpc;

import java.util.UUID;

import org.apache.spark.SparkEnv;
import org.apache.spark.rpc.RpcAddress;
import org.apache.spark.rpc.RpcCallContext;
import org.apache.spark.rpc.RpcEndpointRef;
import org.apache.spark.rpc.RpcEnv;
import org.apache.spark.rpc.ThreadSafeRpcEndpoint;
import scala.Function1;
import scala.PartialFunction;
import scala.runtime.AbstractPartialFunction;
import scala.runtime.BoxedUnit;

/**
 * A driver-side RPC endpoint on Spark's own RPC environment, for state that executors in other
 * JVMs must read (the connector's batch-end requests, the running rules).
 *
 * <p>Why Spark's RPC: it is already there, authenticated and encrypted as the site configured
 * it ({@code spark.authenticate}, {@code spark.network.crypto.enabled}), and it reaches every
 * executor the application has. Messages and replies must be JDK types (String, boxed
 * numbers, arrays of primitives, {@code Object[]} of those): the executor's RPC threads
 * deserialize with the JVM's class loader, which does not see the connector jar.
 *
 * <p>A subclass answers asks in {@link #answer}, one-way sends in {@link #accept}, or both;
 * they run on Spark's RPC threads, one message at a time (a thread-safe endpoint).
 */
public abstract class DriverEndpoint implements ThreadSafeRpcEndpoint {
  private final RpcEnv env;
  private final String name;
  private final RpcEndpointRef ref;

  /** Registers the endpoint as {@code prefix} + a random suffix on this JVM's RPC env. */
  protected DriverEndpoint(RpcEnv env, String prefix) {
    this.env = env;
    this.name = prefix + UUID.randomUUID();
    this.ref = env.setupEndpoint(name, this);
  }

  /** This JVM's Spark RPC env, or null where none runs (no SparkContext). */
  public static RpcEnv localEnv() {
    SparkEnv spark = SparkEnv.get();
    return spark == null ? null : spark.rpcEnv();
  }

  /** The reply to an ask, or null when this endpoint does not know the message (none here). */
  protected Object answer(Object message) {
    return null;
  }

  /** A one-way message; ignored unless a subclass takes it. */
  protected void accept(Object message) {}

  /** What executors need to reach this endpoint. */
  public EndpointAddress address() {
    RpcAddress address = env.address();
    return new EndpointAddress(name, address == null ? null : address.host(),
        address == null ? -1 : address.port());
  }

  public String name() {
    return name;
  }

  public void close() {
    env.stop(ref);
  }

  @Override
  public RpcEnv rpcEnv() {
    return env;
  }

  @Override
  public PartialFunction<Object, BoxedUnit> receive() {
    return new AbstractPartialFunction<Object, BoxedUnit>() {
      @Override
      public boolean isDefinedAt(Object message) {
        return true;
      }

      @Override
      public <A1, B1> B1 applyOrElse(A1 message, Function1<A1, B1> otherwise) {
        accept(message);
        @SuppressWarnings("unchecked")
        B1 unit = (B1) BoxedUnit.UNIT;
        return unit;
      }
    };
  }

  @Override
  public PartialFunction<Object, BoxedUnit> receiveAndReply(RpcCallContext context) {
    return new AbstractPartialFunction<Object, BoxedUnit>() {
      @Override
      public boolean isDefinedAt(Object message) {
        return true;
      }

      @Override
      public <A1, B1> B1 applyOrElse(A1 message, Function1<A1, B1> otherwise) {
        Object reply;
        try {
          reply = answer(message);
        } catch (RuntimeException e) {
          context.sendFailure(e);
          @SuppressWarnings("unchecked")
          B1 unit = (B1) BoxedUnit.UNIT;
          return unit;
        }
        if (reply == null) {
          return otherwise.apply(message);
        }
        context.reply(reply);
        @SuppressWarnings("unchecked")
        B1 unit = (B1) BoxedUnit.UNIT;
        return unit;
      }
    };
  }
}
