"""A run's settings, worked out once: the connector options' precedence, the query's reader
and writer options, and the Kafka client settings every piece gets a copy of (no JVM)."""

from __future__ import annotations

import pytest

from appliance.config import Config
from appliance.process.run_settings import RunSettings
from appliance.tuning import tuning_for


def _config(trigger: str = "microbatch", **sections) -> Config:
    return Config.model_validate({"query": {"trigger": trigger}, **sections})


def test_source_and_sink_options_bootstrap_then_tuning_then_operator_then_kafka():
    config = _config(
        source={"kafka.fetch.max.wait.ms": "50", "maxOffsetsPerTrigger": "10"},
        sink={"kafka.linger.ms": "2"},
        kafka={"security.protocol": "SSL", "client.id": "ops"})
    settings = RunSettings.for_broker(config, "h1:9092,h2:9092")
    tuning = tuning_for(config.query.mode, config.query.async_progress)
    assert settings.tuning == tuning
    source, sink = settings.source_options, settings.sink_options
    assert source["kafka.bootstrap.servers"] == sink["kafka.bootstrap.servers"] == (
        "h1:9092,h2:9092")
    # the operator's [source]/[sink] win over the tuning ...
    assert source["kafka.fetch.max.wait.ms"] == "50"
    assert source["maxOffsetsPerTrigger"] == "10"
    assert sink["kafka.linger.ms"] == "2"
    # ... what they leave alone stays tuned, and [kafka] reaches both, in Java's spelling
    assert source["kafka.fetch.min.bytes"] == tuning.source_options["kafka.fetch.min.bytes"]
    assert source["kafka.security.protocol"] == sink["kafka.security.protocol"] == "SSL"
    assert sink["kafka.client.id"] == "ops"


def test_the_query_reads_the_events_topic_from_the_pairs_offsets_else_the_configs():
    config = _config(topics={"events": "ev"}, query={"trigger": "microbatch",
                                                     "starting_offsets": "earliest"})
    settings = RunSettings.for_broker(config, "h:1")
    reader = settings.reader_options()
    assert reader["subscribe"] == "ev" and reader["startingOffsets"] == "earliest"
    assert reader["kafka.bootstrap.servers"] == "h:1"
    pair = '{"ev":{"0":7}}'
    assert settings.reader_options(pair)["startingOffsets"] == pair


@pytest.mark.parametrize("trigger", ["continuous", "realtime", "microbatch"])
def test_the_writer_gets_the_sink_options_and_the_querys_own(trigger):
    settings = RunSettings.for_broker(_config(trigger), "h:1")
    writer = settings.writer_options()
    assert settings.sink_options.items() <= writer.items()
    assert settings.tuning.query_options.items() <= writer.items()
    assert settings.mode.name == trigger


def test_each_caller_gets_its_own_copy_of_the_client_settings():
    settings = RunSettings.for_broker(_config(kafka={"security.protocol": "SSL"}), "a:1,b:2")
    client = settings.client()
    assert client["bootstrap_servers"] == ["a:1", "b:2"]
    assert client["security_protocol"] == "SSL"
    client["group_id"] = "mine"  # a caller adding its own
    assert "group_id" not in settings.client()
    with pytest.raises(TypeError):
        settings.source_options["kafka.bootstrap.servers"] = "elsewhere"  # type: ignore[index]
