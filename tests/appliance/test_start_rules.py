"""The rules at start-up: ``appliance run`` reads and checks the rules file once.

The CLI reads it before anything starts (a bad rule exits 2 before a JVM) and hands the
checked rule set to the appliance, whose start-up runs that set and does not read the
file again. Here the file named by ``[rules] path`` does not exist, so a second read
would fail the start with "file not found"; the start gets as far as the topics
instead, which are missing on purpose so that it stops there, before Spark.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from appliance.config import load_config
from appliance.process.runner import Appliance
from appliance.rules.rules_file import EXAMPLE_RULES, RulesError, load_rule_set
from appliance.topics import TopicError


def config_without_rules_file(tmp_path: Path, bootstrap: str, events: str):
    toml = tmp_path / "appliance.toml"
    toml.write_text(f"""
[kafka]
bootstrap_servers = "{bootstrap}"
[topics]
events = "{events}"
alerts = "{events}.alerts"
dead_letters = "{events}.dlq"
[rules]
path = "{tmp_path / 'gone.yml'}"
[query]
checkpoint_dir = "{tmp_path / 'checkpoint'}"
""")
    return load_config(toml, environ={})


def test_a_handed_rule_set_is_run_without_reading_the_file_again(tmp_path, broker,
                                                                  new_topic):
    config = config_without_rules_file(tmp_path, broker.bootstrap, new_topic(1))
    rule_set = load_rule_set(EXAMPLE_RULES)
    appliance = Appliance(config, rule_set=rule_set)
    try:
        with pytest.raises(TopicError, match="topics missing on the Kafka cluster"):
            appliance.start()
        assert appliance.rules.running_rules() is rule_set
    finally:
        appliance.stop()


def test_without_a_rule_set_the_start_reads_the_file(tmp_path, broker, new_topic):
    config = config_without_rules_file(tmp_path, broker.bootstrap, new_topic(1))
    appliance = Appliance(config)
    try:
        with pytest.raises(RulesError, match="gone.yml: file not found"):
            appliance.start()
    finally:
        appliance.stop()
