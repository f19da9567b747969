package io.appliance.rules;

import java.io.Serializable;
import java.util.Objects;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.BoundReference;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.GetMapValue;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.sql.catalyst.util.MapData;
import org.apache.spark.sql.types.MapType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * A string an event carries that rules can be indexed by: one of its string fields
 * ({@code metric}, {@code source}, ...) or one entry of a string map field by key
 * ({@code tags['env']}).
 *
 * <p>Only strings compared byte for byte (Spark's default UTF8_BINARY collation) qualify: the
 * index looks values up by their bytes, which is what {@code =} means for them.
 */
final class IndexKey implements Serializable {
  private static final long serialVersionUID = 1L;

  /** The field's position in the event row. */
  final int ordinal;
  /** For a map field, the entry's key; null for a string field. */
  final UTF8String mapKey;
  /** How the key reads in a rule ({@code metric}, {@code tags['env']}). */
  final String name;

  private IndexKey(int ordinal, UTF8String mapKey, String name) {
    this.ordinal = ordinal;
    this.mapKey = mapKey;
    this.name = name;
  }

  /** The key {@code e} reads, or null if {@code e} is not a plain field or map entry. */
  static IndexKey of(Expression e, String[] fieldNames) {
    if (e instanceof BoundReference && binaryString(e)) {
      int ordinal = ((BoundReference) e).ordinal();
      return new IndexKey(ordinal, null, fieldNames[ordinal]);
    }
    if (e instanceof GetMapValue) {
      GetMapValue get = (GetMapValue) e;
      Expression map = get.left();
      Expression key = get.right();
      if (map instanceof BoundReference && key instanceof Literal
          && ((Literal) key).value() instanceof UTF8String
          && map.dataType() instanceof MapType
          && binaryString(((MapType) map.dataType()).keyType())
          && binaryString(((MapType) map.dataType()).valueType())) {
        int ordinal = ((BoundReference) map).ordinal();
        UTF8String k = (UTF8String) ((Literal) key).value();
        return new IndexKey(ordinal, k.clone(), fieldNames[ordinal] + "['" + k + "']");
      }
    }
    return null;
  }

  private static boolean binaryString(Expression e) {
    return binaryString(e.dataType());
  }

  private static boolean binaryString(org.apache.spark.sql.types.DataType t) {
    return t instanceof StringType && ((StringType) t).supportsBinaryEquality();
  }

  /** The event's value for this key, or null (absent field, absent map entry, null value). */
  UTF8String read(InternalRow event) {
    if (event.isNullAt(ordinal)) {
      return null;
    }
    if (mapKey == null) {
      return event.getUTF8String(ordinal);
    }
    MapData map = event.getMap(ordinal);
    ArrayData keys = map.keyArray();
    for (int i = 0, n = map.numElements(); i < n; i++) {
      if (mapKey.equals(keys.getUTF8String(i))) {
        ArrayData values = map.valueArray();
        return values.isNullAt(i) ? null : values.getUTF8String(i);
      }
    }
    return null;
  }

  @Override
  public boolean equals(Object o) {
    if (!(o instanceof IndexKey)) {
      return false;
    }
    IndexKey k = (IndexKey) o;
    return ordinal == k.ordinal && Objects.equals(mapKey, k.mapKey);
  }

  @Override
  public int hashCode() {
    return 31 * ordinal + Objects.hashCode(mapKey);
  }

  @Override
  public String toString() {
    return name;
  }
}
