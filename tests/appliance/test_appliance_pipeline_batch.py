"""The transformation on a BATCH DataFrame with the Kafka read schema (no broker needed)."""

from __future__ import annotations

import datetime
import json

import pytest
from pyspark.errors import IllegalArgumentException
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from appliance.config import TopicsConfig
from appliance.events import EVENT_DDL, FIELD_NAMES
from appliance.process.session import generated_classes
from appliance.query.pipeline import KAFKA_READ_SCHEMA, event_reader, transform
from appliance.rules.rules_file import parse_rule_set

from support.appliance_mix import check_outputs, make_mix

pytestmark = pytest.mark.spark


def as_kafka_records(spark, values: list[bytes], topic: str = "events"):
    now = datetime.datetime.now()
    rows = [(None, v, topic, i % 2, i, now, 0) for i, v in enumerate(values)]
    return spark.createDataFrame(rows, KAFKA_READ_SCHEMA)


def run_batch(spark, rule_book, mix, topics=None):
    topics = topics or TopicsConfig()
    out = transform(as_kafka_records(spark, mix.records),
                    rule_book(parse_rule_set(mix.rules_yaml)), topics)
    return out.collect()


def test_known_mix_gives_exactly_the_expected_alerts_and_dead_letters(appliance_spark,
                                                                      rule_book):
    mix = make_mix("batch")
    rows = run_batch(appliance_spark, rule_book, mix)
    assert {r.topic for r in rows} == {"alerts", "events.dlq"}
    alerts = [(r.key, r.value.encode()) for r in rows if r.topic == "alerts"]
    dead = [(r.key, r.value.encode()) for r in rows if r.topic == "events.dlq"]
    check_outputs(mix, alerts, dead)


def test_topic_names_come_from_config(appliance_spark, rule_book):
    mix = make_mix("topics")
    rows = run_batch(appliance_spark, rule_book, mix,
                     TopicsConfig(alerts="a.out", dead_letters="bad"))
    assert {r.topic for r in rows} == {"a.out", "bad"}


def test_dead_letter_keeps_source_position_and_original_key(appliance_spark, rule_book):
    now = datetime.datetime.now()
    df = appliance_spark.createDataFrame([(b"k1", b"nope", "in", 3, 41, now, 0)],
                                         KAFKA_READ_SCHEMA)
    rules = parse_rule_set("rules:\n  - {id: a, severity: info, when: 'value > 1'}\n")
    (row,) = transform(df, rule_book(rules), TopicsConfig()).collect()
    assert row.key == b"k1"
    assert row.value == ('{"error":"malformed JSON","raw":"nope","encoding":"utf8",'
                         '"topic":"in","partition":3,"offset":41}')


# Text after a complete value that closes one of the pipeline's two wraps early: each of
# these once passed the array-wrap check alone (',0]' closes '[<text>,0]' on the text's own
# bracket), or would pass the object wrap alone (', "k": 1' continues '{"v":<text>}').
TRAILING = [b",0]", b",0] x", b",0]]", b', "k": 1', b', "k": 1}', b",0,0]", b" x", b"}",
            b"]", b"{}", b",", b' {"a": 1}']


@pytest.mark.parametrize("junk", TRAILING, ids=[t.decode() for t in TRAILING])
def test_anything_after_the_json_value_makes_a_dead_letter(appliance_spark, rule_book, junk):
    event = json.dumps({"event_id": "trailing", "ts": 1, "source": "h", "metric": "cpu",
                        "value": 99}).encode()
    rules = parse_rule_set("rules:\n  - {id: hot, severity: critical, when: 'value > 90'}\n")
    records = as_kafka_records(appliance_spark, [event + junk, b" \r\n" + event + b"\t "])
    rows = transform(records, rule_book(rules), TopicsConfig()).collect()
    by_topic = {r.topic: r for r in rows}
    assert sorted(by_topic) == ["alerts", "events.dlq"], rows
    dead = json.loads(by_topic["events.dlq"].value)
    assert (dead["error"], dead["raw"], dead["offset"]) == ("malformed JSON",
                                                            (event + junk).decode(), 0)
    assert json.loads(by_topic["alerts"].value)["event_id"] == "trailing"  # whitespace is fine


def test_plan_is_map_only_and_has_no_python_udf(appliance_spark, rule_book):
    """Continuous mode accepts only projections and filters; no Python runs per record."""
    mix = make_mix("plan")
    out = transform(as_kafka_records(appliance_spark, mix.records),
                    rule_book(parse_rule_set(mix.rules_yaml)), TopicsConfig())
    plan = out._jdf.queryExecution().optimizedPlan().toString()
    for forbidden in ("Generate", "Union", "Aggregate", "BatchEvalPython", "ArrowEvalPython",
                      "PythonUDF"):
        assert forbidden not in plan, plan
    assert out.select(F.col("key"), F.col("value"), F.col("topic")).columns == [
        "key", "value", "topic"]


def test_plan_evaluates_each_expensive_expression_once_per_record(appliance_spark, rule_book):
    """Catalyst inlines projections into a filter pushed below them; the routing filter
    would then carry its own copy of the parse, the rules and both JSON encoders, evaluated
    a second time for every record. The optimized plan holds exactly one of each: one read
    of the record (the connector's EventReader) and none of Spark's JSON parsers besides."""
    mix = make_mix("plan-once")
    out = transform(as_kafka_records(appliance_spark, mix.records),
                    rule_book(parse_rule_set(mix.rules_yaml)), TopicsConfig())
    plan = out._jdf.queryExecution().optimizedPlan().toString()
    expected = {
        "EventReader(": 1,            # the one walk over each record
        "RuleMatcher": 1,             # the one evaluation of the rules (the rule book)
        "StructsToJsonEvaluator": 2,  # the alert JSON and the dead-letter JSON
        "parseJson": 0,               # no other JSON parser reads the record
        "lengthOfJsonArray": 0,
        "from_json(": 0,
        "schema_of_variant": 0,
    }
    counts = {name: plan.count(name) for name in expected}
    assert counts == expected, plan


def test_the_record_read_is_compiled_into_the_stage(appliance_spark, rule_book):
    """The reader is an ``Invoke`` on a literal object: whole-stage code generation keeps
    it, so the stage's generated code calls ``EventReader.read`` directly (no row copies,
    no reflection per record)."""
    mix = make_mix("plan-codegen")
    out = transform(as_kafka_records(appliance_spark, mix.records),
                    rule_book(parse_rule_set(mix.rules_yaml)), TopicsConfig())
    executed = out._jdf.queryExecution().executedPlan().toString()
    read = [line for line in executed.splitlines() if "EventReader(" in line]
    assert len(read) == 1 and read[0].lstrip(" +-:").startswith("*("), executed
    assert len(out.collect()) == len(mix.alerts) + len(mix.dead_letters)


def test_the_reader_reads_the_event_table(appliance_spark):
    """The Java reader knows JSON types, not fields: its typed columns are the event
    table's (``appliance.events``), and a JSON type it has no reader for is refused
    when the plan is built, naming the type."""
    reader = event_reader(appliance_spark)
    schema = StructType.fromJson(json.loads(reader.schema().json()))
    assert schema.fieldNames() == ["error", "utf8", *FIELD_NAMES]
    typed = StructType(schema.fields[2:])
    assert typed.simpleString() == appliance_spark.createDataFrame([], EVENT_DDL).schema \
        .simpleString()
    jvm = appliance_spark.sparkContext._jvm
    with pytest.raises(IllegalArgumentException, match="JSON type 'date' has no reader"):
        jvm.io.appliance.events.EventReader.create(["when"], ["date"], [True])


def test_planning_other_rules_generates_no_new_classes(appliance_spark, rule_book):
    """Spark caches generated classes by their code's text, and the warm-up relies on it:
    the classes it JIT-compiles must be the ones the query then runs. The rules are data in
    a rule book, not code, so even a plan over different rules compiles nothing new; and a
    name that changes with every planning (PySpark's lambda variables, ``x_<n>``) would."""
    mix = make_mix("plan-again")
    run_batch(appliance_spark, rule_book, mix)
    before = generated_classes(appliance_spark)
    others = parse_rule_set("rules:\n  - {id: other, severity: warning, when: \"value < 0 OR "
                            "tags['x'] = 'y'\"}\n  - {id: more, severity: info, when: "
                            "\"startswith(source, 'h')\"}\n")
    for rules in (parse_rule_set(mix.rules_yaml), others):
        out = transform(as_kafka_records(appliance_spark, mix.records), rule_book(rules),
                        TopicsConfig())
        assert len(out.collect()) >= len(mix.dead_letters)
    assert generated_classes(appliance_spark) == before
