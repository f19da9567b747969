package io.appliance.kafka;

import java.util.Map;

import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * The data source {@code format("appliance-kafka")}: option- and schema-compatible with
 * Spark's built-in kafka source and sink.
 */
public class ApplianceKafkaProvider implements TableProvider, DataSourceRegister {
  @Override
  public String shortName() {
    return "appliance-kafka";
  }

  /** Validates read options here, at load(), so a wrong query fails before it starts. */
  @Override
  public StructType inferSchema(CaseInsensitiveStringMap options) {
    boolean headers = false;
    if (SourceOptions.looksLikeRead(options)) {
      headers = SourceOptions.parse(options).includeHeaders();
    }
    return RecordRows.schema(headers);
  }

  @Override
  public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
    return new KafkaTable(schema);
  }
}
