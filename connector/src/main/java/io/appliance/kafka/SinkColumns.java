package io.appliance.kafka;

import java.io.Serializable;
import java.util.Locale;

import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.BinaryType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * Where the sink finds value, key, topic, partition and headers in the written rows, checked
 * against the types Spark's kafka sink accepts when the query starts.
 */
final class SinkColumns implements Serializable {
  private static final long serialVersionUID = 1L;

  final int value;
  final boolean valueIsString;
  final int key;
  final boolean keyIsString;
  final int topic;
  final int partition;
  final int headers;
  final String topicOption;

  private SinkColumns(StructType schema, String topicOption) {
    this.topicOption = topicOption;
    value = index(schema, "value");
    if (value < 0) {
      throw new IllegalArgumentException(
          "Required attribute 'value' not found in the rows written to appliance-kafka");
    }
    valueIsString = stringOrBinary(schema.fields()[value], "value");
    key = index(schema, "key");
    keyIsString = key >= 0 && stringOrBinary(schema.fields()[key], "key");
    topic = index(schema, "topic");
    if (topic >= 0 && !(schema.fields()[topic].dataType() instanceof StringType)) {
      throw new IllegalArgumentException("Attribute 'topic' must be a string, got "
          + schema.fields()[topic].dataType().simpleString());
    }
    if (topic < 0 && topicOption == null) {
      throw new IllegalArgumentException("No topic to write to: add a 'topic' column "
          + "or set the option 'topic'");
    }
    partition = index(schema, "partition");
    if (partition >= 0 && !DataTypes.IntegerType.equals(schema.fields()[partition].dataType())) {
      throw new IllegalArgumentException("Attribute 'partition' must be an int, got "
          + schema.fields()[partition].dataType().simpleString());
    }
    headers = index(schema, "headers");
    if (headers >= 0 && !headersType(schema.fields()[headers].dataType())) {
      throw new IllegalArgumentException("Attribute 'headers' must be "
          + "array<struct<key:string,value:binary>>, got "
          + schema.fields()[headers].dataType().simpleString());
    }
  }

  static SinkColumns resolve(StructType schema, String topicOption) {
    return new SinkColumns(schema, topicOption);
  }

  private static int index(StructType schema, String name) {
    StructField[] fields = schema.fields();
    for (int i = 0; i < fields.length; i++) {
      if (fields[i].name().toLowerCase(Locale.ROOT).equals(name)) {
        return i;
      }
    }
    return -1;
  }

  private static boolean stringOrBinary(StructField f, String name) {
    if (f.dataType() instanceof StringType) {
      return true;
    }
    if (f.dataType() instanceof BinaryType) {
      return false;
    }
    throw new IllegalArgumentException("Attribute '" + name + "' must be a string or binary, got "
        + f.dataType().simpleString());
  }

  private static boolean headersType(DataType t) {
    if (!(t instanceof ArrayType) || !(((ArrayType) t).elementType() instanceof StructType)) {
      return false;
    }
    StructField[] f = ((StructType) ((ArrayType) t).elementType()).fields();
    return f.length == 2 && f[0].dataType() instanceof StringType && f[1].dataType() instanceof BinaryType;
  }
}
