package io.appliance.events;

import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;

/**
 * The JSON type an event field must have, by the name the Python event table gives it
 * ({@code appliance.events}: {@code STRING}, {@code NUMBER}, {@code STRING_MAP}), with the
 * Spark type the field is read as and the words its dead-letter reason uses.
 */
enum JsonKind {
  STRING("string", "a string", DataTypes.StringType),
  NUMBER("number", "a number", DataTypes.DoubleType),
  STRING_MAP("object of string to string", "an object of string to string",
      DataTypes.createMapType(DataTypes.StringType, DataTypes.StringType, true));

  final String jsonName;
  final String phrase;       // "wrong type: <field> must be <phrase>"
  final DataType sparkType;

  JsonKind(String jsonName, String phrase, DataType sparkType) {
    this.jsonName = jsonName;
    this.phrase = phrase;
    this.sparkType = sparkType;
  }

  static JsonKind named(String jsonName) {
    for (JsonKind kind : values()) {
      if (kind.jsonName.equals(jsonName)) {
        return kind;
      }
    }
    throw new IllegalArgumentException("event field JSON type '" + jsonName
        + "' has no reader (known: string, number, object of string to string)");
  }
}
