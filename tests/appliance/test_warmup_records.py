"""The warm-up's synthetic records through the real pipeline: exactly the outputs their ids
promise, and a dead letter for each reason (the warm-up exists to run every path the query
will, the dead-letter ones included)."""

from __future__ import annotations

import json

import pytest

from appliance.config import TopicsConfig
from appliance.query.pipeline import transform
from appliance.query.warmup import WARMUP_RULE, synthetic_records
from appliance.rules.rules_file import RuleSet

pytestmark = pytest.mark.spark

COUNT = 1_000  # 20 bad records: each of the 5 bad values 4 times


def test_through_the_pipeline_each_record_gives_the_output_its_id_promises(appliance_spark,
                                                                          rule_book):
    topics = TopicsConfig(alerts="alerts", dead_letters="dead")
    out = transform(synthetic_records(appliance_spark, COUNT),
                    rule_book(RuleSet.of([WARMUP_RULE])), topics).collect()
    alerts = {json.loads(r.value)["event_id"] for r in out if r.topic == "alerts"}
    dead = [json.loads(r.value) for r in out if r.topic == "dead"]
    assert alerts == {f"warmup-{i}" for i in range(COUNT) if i % 10 == 3}
    assert sorted(d["offset"] for d in dead) == [i for i in range(COUNT) if i % 50 == 7]
    reasons = {d["error"].split(":")[0] for d in dead}
    assert reasons == {"malformed JSON", "missing field", "not a JSON object",
                       "not valid UTF-8", "wrong type"}
