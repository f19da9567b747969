package io.appliance.rules;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.ObjectInputStream;
import java.io.ObjectOutputStream;
import java.io.ObjectStreamClass;

/**
 * Java serialization both ways, reading classes with a given loader (a task's: the connector
 * jar is not on the JVM's own class path on executors).
 *
 * <p>Two uses: a rules version travels to executors in other JVMs ({@link RemoteBook}), and
 * a task gets its own copy of a rule's expression ({@link CompiledRule#taskCopy}). A copy
 * read back from bytes shares no object with the original or with any other copy, whatever
 * the expression's classes hold, while the objects shared inside it (a lambda's variable
 * and the references to it in the lambda's body) stay shared inside the copy.
 */
final class Serialized {
  private Serialized() {}

  static byte[] write(Object value, String what) {
    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    try (ObjectOutputStream out = new ObjectOutputStream(bytes)) {
      out.writeObject(value);
    } catch (IOException e) {
      throw new IllegalStateException("cannot serialize " + what, e);
    }
    return bytes.toByteArray();
  }

  static Object read(byte[] bytes, ClassLoader loader, String what) {
    try (InputStream in = new ByteArrayInputStream(bytes);
         ObjectInputStream objects = new LoaderObjectInputStream(in, loader)) {
      return objects.readObject();
    } catch (IOException | ClassNotFoundException e) {
      throw new IllegalStateException("cannot read " + what, e);
    }
  }

  /** The calling thread's context class loader, else this class's. */
  static ClassLoader taskLoader() {
    ClassLoader loader = Thread.currentThread().getContextClassLoader();
    return loader != null ? loader : Serialized.class.getClassLoader();
  }

  /** Reads classes with a given loader, then the JVM's. */
  private static final class LoaderObjectInputStream extends ObjectInputStream {
    private final ClassLoader loader;

    LoaderObjectInputStream(InputStream in, ClassLoader loader) throws IOException {
      super(in);
      this.loader = loader;
    }

    @Override
    protected Class<?> resolveClass(ObjectStreamClass desc)
        throws IOException, ClassNotFoundException {
      try {
        return Class.forName(desc.getName(), false, loader);
      } catch (ClassNotFoundException e) {
        return super.resolveClass(desc);
      }
    }
  }
}
