package io.appliance.events;

import java.io.IOException;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.StreamReadConstraints;
import com.fasterxml.jackson.core.StreamReadFeature;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.expressions.objects.Invoke;
import org.apache.spark.sql.catalyst.expressions.variant.SchemaOfVariant;
import org.apache.spark.sql.catalyst.util.ArrayBasedMapData;
import org.apache.spark.sql.catalyst.util.CollationFactory;
import org.apache.spark.sql.catalyst.util.CollationSupport;
import org.apache.spark.sql.catalyst.util.GenericArrayData;
import org.apache.spark.sql.classic.ExpressionUtils;
import org.apache.spark.sql.types.AbstractDataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.ObjectType;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.types.variant.Variant;
import org.apache.spark.types.variant.VariantBuilder;
import org.apache.spark.unsafe.types.UTF8String;
import org.apache.spark.unsafe.types.VariantVal;
import scala.jdk.javaapi.CollectionConverters;

/**
 * One walk over a Kafka record's bytes that yields the event's typed fields or the reason it is
 * a dead letter: the appliance's record validation as a single Catalyst expression.
 *
 * <p>Why: built from Spark's JSON functions, the validation walked each record's JSON three
 * times (two wrapped parses, because Spark's JSON readers stop after the first value and ignore
 * what follows it, then a typed {@code from_json}) plus one {@code schema_of_variant} probe per
 * field: the largest per-record cost of the query. Here one Jackson parser reads the record
 * once, checks that nothing but whitespace follows the value, and reads the event's fields typed
 * on the way.
 *
 * <p>The verdicts and reason strings are the contract ({@code docs/appliance.md}, "Records"), so
 * they are those of Spark's own parsers, reproduced by using the same ones: Jackson with its
 * default (strict) features and read limits, as {@code parse_json} uses it, with one level of
 * nesting less (the old wrap {@code {"v":<text>}} took one); duplicate keys at any depth refused
 * ({@code spark.sql.variant.allowDuplicateKeys} is false by default); strings holding a lone
 * surrogate refused ({@code spark.sql.variant.validateUnicodeInJsonParsing}, true by default);
 * {@code is_valid_utf8}'s validity; a wrongly typed field's type rendered by Spark's
 * {@code schema_of_variant} and lowered like {@code lower()} (only dead letters pay for that).
 * Jackson reads bytes after sniffing their encoding; a byte-order mark or a NUL byte in the first
 * four bytes would make it skip the mark or read UTF-16/32, and neither can start a JSON text,
 * so both are malformed before the parser sees them.
 *
 * <p>The field table comes from Python ({@code appliance.events.FIELDS}); this class knows
 * only the JSON types ({@link JsonKind}). It is used as the target object of an {@link Invoke}
 * expression (see {@link #column}), so generated code calls {@link #read} directly, and the
 * instance travels with the plan (serialized) to the executors.
 */
public final class EventReader implements Serializable {
  private static final long serialVersionUID = 1L;

  static final String EMPTY = "empty value";
  static final String NOT_UTF8 = "not valid UTF-8";
  static final String MALFORMED = "malformed JSON";
  static final String NOT_OBJECT = "not a JSON object";

  /** Positions in the result struct: the reason (null: a valid event), UTF-8 validity, fields. */
  public static final int ERROR = 0;
  public static final int UTF8 = 1;
  private static final int FIRST_FIELD = 2;

  private static final byte ABSENT = 0;   // not in the record, or JSON null
  private static final byte PRESENT = 1;  // present with the field's JSON type
  private static final byte WRONG = 2;    // present with another JSON type

  private static final StreamReadConstraints LIMITS = StreamReadConstraints.defaults();
  /** Strings longer than this are refused; only a decoded string is checked, see read(). */
  private static final int MAX_STRING_CHARS = LIMITS.getMaxStringLength();
  private static final JsonFactory JSON = JsonFactory.builder()
      .enable(StreamReadFeature.STRICT_DUPLICATE_DETECTION)
      .streamReadConstraints(LIMITS.rebuild()
          .maxNestingDepth(LIMITS.getMaxNestingDepth() - 1).build())
      .build();

  private final String[] names;
  private final JsonKind[] kinds;
  private final boolean[] required;
  private final StructType schema;

  private EventReader(String[] names, JsonKind[] kinds, boolean[] required) {
    this.names = names;
    this.kinds = kinds;
    this.required = required;
    StructType s = new StructType()
        .add("error", DataTypes.StringType, true)
        .add("utf8", DataTypes.BooleanType, true);
    for (int i = 0; i < names.length; i++) {
      s = s.add(names[i], kinds[i].sparkType, true);
    }
    this.schema = s;
  }

  /** The reader of events with these fields (names, JSON type names, required), in order. */
  public static EventReader create(List<String> names, List<String> jsonTypes,
      List<Boolean> required) {
    int n = names.size();
    if (jsonTypes.size() != n || required.size() != n || n == 0) {
      throw new IllegalArgumentException("event fields: " + n + " names, " + jsonTypes.size()
          + " JSON types, " + required.size() + " required flags (one each, at least one)");
    }
    String[] fieldNames = names.toArray(new String[0]);
    JsonKind[] fieldKinds = new JsonKind[n];
    boolean[] fieldRequired = new boolean[n];
    for (int i = 0; i < n; i++) {
      fieldKinds[i] = JsonKind.named(jsonTypes.get(i));
      fieldRequired[i] = required.get(i);
    }
    return new EventReader(fieldNames, fieldKinds, fieldRequired);
  }

  /** {@code error string, utf8 boolean}, then each field as its Spark type. */
  public StructType schema() {
    return schema;
  }

  /** {@code raw} (a binary column) read into {@link #schema()}: one Catalyst expression. */
  public Column column(Column raw) {
    Expression self = new Literal(this, new ObjectType(EventReader.class));
    List<Expression> args = List.of(ExpressionUtils.expression(raw));
    List<AbstractDataType> types = List.of(DataTypes.BinaryType);
    return ExpressionUtils.column(new Invoke(self, "read", schema,
        CollectionConverters.asScala(args).toList(), CollectionConverters.asScala(types).toList(),
        false /* a null record is read too: "empty value" */, false, true));
  }

  /** The record's row: never null. */
  public InternalRow read(byte[] raw) {
    Object[] row = new Object[FIRST_FIELD + names.length];
    if (raw == null || raw.length == 0) {
      row[ERROR] = UTF8String.fromString(EMPTY);
      row[UTF8] = raw == null ? null : Boolean.TRUE;  // as is_valid_utf8 says
      return new GenericInternalRow(row);
    }
    boolean ascii = true;
    boolean backslash = false;
    for (byte b : raw) {
      ascii &= b >= 0;
      backslash |= b == '\\';
    }
    if (!ascii && !UTF8String.fromBytes(raw).isValid()) {
      row[ERROR] = UTF8String.fromString(NOT_UTF8);
      row[UTF8] = Boolean.FALSE;
      return new GenericInternalRow(row);
    }
    row[UTF8] = Boolean.TRUE;
    String error;
    if (sniffedAsOtherEncoding(raw)) {
      error = MALFORMED;
    } else {
      // Skipped strings are not decoded: decode them all when one could hold a lone surrogate
      // (only a \\uD800-\\uDFFF escape can, the bytes are valid UTF-8) or be over the length
      // limit, which Jackson checks when it decodes.
      boolean careful = (backslash && hasSurrogateEscape(raw)) || raw.length > MAX_STRING_CHARS;
      try {
        error = walk(raw, careful, row);
      } catch (IOException | RuntimeException e) {  // parse errors, limits, duplicate keys
        error = MALFORMED;
      }
    }
    if (error != null) {
      Arrays.fill(row, FIRST_FIELD, row.length, null);
      row[ERROR] = UTF8String.fromString(error);
    }
    return new GenericInternalRow(row);
  }

  /** The record's one JSON value: its fields into {@code row}; returns the reason or null. */
  private String walk(byte[] raw, boolean careful, Object[] row) throws IOException {
    try (JsonParser p = JSON.createParser(raw)) {
      JsonToken t = p.nextToken();
      if (t == null) {
        return MALFORMED;  // whitespace only
      }
      if (t != JsonToken.START_OBJECT) {
        skip(p, t, careful);
        return p.nextToken() == null ? NOT_OBJECT : MALFORMED;
      }
      byte[] state = new byte[names.length];
      String[] got = null;
      while (p.nextToken() == JsonToken.FIELD_NAME) {  // else END_OBJECT: the parser checks
        String name = p.currentName();
        if (careful) {
          checkUnicode(name);
        }
        JsonToken v = p.nextToken();
        int i = indexOf(name);
        if (i < 0) {
          skip(p, v, careful);
          continue;
        }
        Object value = null;
        switch (kinds[i]) {
          case STRING:
            if (v == JsonToken.VALUE_STRING) {
              value = UTF8String.fromString(text(p, careful));
            }
            break;
          case NUMBER:
            if (v == JsonToken.VALUE_NUMBER_INT || v == JsonToken.VALUE_NUMBER_FLOAT) {
              value = p.getDoubleValue();
            }
            break;
          default:  // STRING_MAP: its reason names no type
            if (v == JsonToken.START_OBJECT) {
              value = stringMap(p, careful);  // read to its end either way
            } else {
              skip(p, v, careful);
            }
        }
        if (value != null) {
          state[i] = PRESENT;
          row[FIRST_FIELD + i] = value;
        } else if (v != JsonToken.VALUE_NULL) {
          state[i] = WRONG;
          if (kinds[i] != JsonKind.STRING_MAP) {
            if (got == null) {
              got = new String[names.length];
            }
            got[i] = typeName(p);  // reads the value
          }
        }
      }
      if (p.nextToken() != null) {
        return MALFORMED;  // something after the object
      }
      return reasons(state, got, row);
    }
  }

  /** The field reasons joined by "; " (in field order), or null. */
  private String reasons(byte[] state, String[] got, Object[] row) {
    StringBuilder out = null;
    for (int i = 0; i < names.length; i++) {
      String reason = null;
      if (state[i] == ABSENT && required[i]) {
        reason = "missing field: " + names[i];
      } else if (state[i] == WRONG) {
        reason = "wrong type: " + names[i] + " must be " + kinds[i].phrase
            + (got != null && got[i] != null ? ", got " + got[i] : "");
      } else if (state[i] == PRESENT && kinds[i] == JsonKind.NUMBER
          && Double.isInfinite((Double) row[FIRST_FIELD + i])) {
        reason = "wrong type: " + names[i] + " must be a finite number";
      }
      if (reason != null) {
        out = out == null ? new StringBuilder(reason) : out.append("; ").append(reason);
      }
    }
    return out == null ? null : out.toString();
  }

  /** An object of strings as a map, or null (then skipped to its end) if a value is not one. */
  private static ArrayBasedMapData stringMap(JsonParser p, boolean careful) throws IOException {
    List<UTF8String> keys = new ArrayList<>(4);
    List<UTF8String> values = new ArrayList<>(4);
    boolean strings = true;
    while (p.nextToken() == JsonToken.FIELD_NAME) {
      String key = p.currentName();
      if (careful) {
        checkUnicode(key);
      }
      JsonToken v = p.nextToken();
      if (v == JsonToken.VALUE_STRING) {
        keys.add(UTF8String.fromString(key));
        values.add(UTF8String.fromString(text(p, careful)));
      } else {
        strings = false;
        skip(p, v, careful);
      }
    }
    return strings ? new ArrayBasedMapData(new GenericArrayData(keys.toArray()),
        new GenericArrayData(values.toArray())) : null;
  }

  private int indexOf(String name) {
    for (int i = 0; i < names.length; i++) {
      if (names[i].equals(name)) {
        return i;
      }
    }
    return -1;
  }

  private static String text(JsonParser p, boolean careful) throws IOException {
    String s = p.getText();
    if (careful) {
      checkUnicode(s);
    }
    return s;
  }

  /** Past the value starting at {@code t}; when careful, every string in it decoded and checked. */
  private static void skip(JsonParser p, JsonToken t, boolean careful) throws IOException {
    if (!careful) {
      p.skipChildren();
      return;
    }
    if (t == JsonToken.VALUE_STRING) {
      checkUnicode(p.getText());
      return;
    }
    if (t != JsonToken.START_OBJECT && t != JsonToken.START_ARRAY) {
      return;
    }
    for (int depth = 1; depth > 0; ) {
      JsonToken x = p.nextToken();
      if (x == null) {
        throw new IOException("unexpected end of input");
      }
      switch (x) {
        case START_OBJECT:
        case START_ARRAY:
          depth++;
          break;
        case END_OBJECT:
        case END_ARRAY:
          depth--;
          break;
        case FIELD_NAME:
          checkUnicode(p.currentName());
          break;
        case VALUE_STRING:
          checkUnicode(p.getText());
          break;
        default:
          break;
      }
    }
  }

  /** The type of the value at the parser's token as {@code lower(schema_of_variant(value))}. */
  private static String typeName(JsonParser p) throws IOException {
    Variant v = VariantBuilder.parseJson(p, false, true);
    UTF8String type = SchemaOfVariant.schemaOfVariant(new VariantVal(v.getValue(), v.getMetadata()));
    return CollationSupport.Lower.exec(type, CollationFactory.UTF8_BINARY_COLLATION_ID, true)
        .toString();
  }

  /** As parse_json refuses them: an unpaired UTF-16 surrogate. */
  private static void checkUnicode(String s) throws IOException {
    for (int i = 0, n = s.length(); i < n; i++) {
      char c = s.charAt(i);
      if (Character.isHighSurrogate(c)) {
        if (i + 1 >= n || !Character.isLowSurrogate(s.charAt(i + 1))) {
          throw new IOException("lone high surrogate");
        }
        i++;
      } else if (Character.isLowSurrogate(c)) {
        throw new IOException("lone low surrogate");
      }
    }
  }

  /** A {@code \\u} escape of a UTF-16 surrogate (D800-DFFF) anywhere in the bytes. */
  static boolean hasSurrogateEscape(byte[] raw) {
    for (int i = 0; i + 3 < raw.length; i++) {
      if (raw[i] == '\\' && raw[i + 1] == 'u' && (raw[i + 2] == 'd' || raw[i + 2] == 'D')) {
        byte c = raw[i + 3];
        if (c == '8' || c == '9' || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')) {
          return true;
        }
      }
    }
    return false;
  }

  /** Bytes Jackson would not read as plain UTF-8: a byte-order mark, or a NUL early on. */
  static boolean sniffedAsOtherEncoding(byte[] raw) {
    if (raw.length >= 3 && raw[0] == (byte) 0xEF && raw[1] == (byte) 0xBB
        && raw[2] == (byte) 0xBF) {
      return true;
    }
    for (int i = 0; i < Math.min(4, raw.length); i++) {
      if (raw[i] == 0) {
        return true;
      }
    }
    return false;
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof EventReader && Arrays.equals(names, ((EventReader) o).names)
        && Arrays.equals(kinds, ((EventReader) o).kinds)
        && Arrays.equals(required, ((EventReader) o).required);
  }

  @Override
  public int hashCode() {
    return Arrays.hashCode(names) * 31 + Arrays.hashCode(kinds);
  }

  /** Stable text (plans print it; no identity hash in it). */
  @Override
  public String toString() {
    StringBuilder out = new StringBuilder("EventReader(");
    for (int i = 0; i < names.length; i++) {
      out.append(i == 0 ? "" : ", ").append(names[i]).append(": ").append(kinds[i].jsonName)
          .append(required[i] ? "" : "?");
    }
    return out.append(')').toString();
  }
}
