"""appliance.connector: the jar paths every SparkSession needs, or a clear error."""

from __future__ import annotations

from pathlib import Path

import pytest

from appliance import connector


def test_jars_are_absolute_existing_connector_and_client_jars():
    paths = connector.jars()
    assert [Path(p).name for p in paths] == ["appliance-kafka-connector.jar",
                                            "kafka-clients-3.9.1.jar"]
    assert all(Path(p).is_absolute() and Path(p).is_file() for p in paths)
    assert connector.spark_jars_conf()["spark.jars"] == ",".join(paths)


def test_missing_jar_names_the_file_and_the_fix(monkeypatch, tmp_path):
    monkeypatch.setattr(connector, "CONNECTOR_JAR", tmp_path / "appliance-kafka-connector.jar")
    with pytest.raises(connector.ConnectorJarsMissing, match="make setup") as err:
        connector.jars()
    assert "appliance-kafka-connector.jar" in str(err.value)
