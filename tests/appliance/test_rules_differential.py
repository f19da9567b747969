"""The rule book against the reference: the same alerts and dead letters, record for record.

The appliance evaluates rules from a rule book (``appliance.rules.rule_book``: compiled once,
indexed by the equalities they require, each event evaluated only against the rules it can
match). ``appliance.rules.naive_rules`` compiles every rule into the plan and evaluates all
of them for every event, as the appliance did before. Seeded random rule sets and events
(``random_rules``: indexable and residual rules, overlaps, every severity, nulls, LIKE,
absent tags, edge values, every kind of bad record) go through both, in the appliance's SQL
settings, as batches and as streaming queries in each trigger mode, and the outputs must be
equal: same records (key, value JSON, topic, headers), same dead letters.
"""

from __future__ import annotations

import datetime
import json
import time

import pytest

from appliance.config import TopicsConfig
from appliance.query.pipeline import KAFKA_READ_SCHEMA, transform
from appliance.query.stream_query import StreamSpec, stream_writer
from appliance.rules.naive_rules import NaiveRules
from appliance.rules.rule_book import RuleBook
from appliance.rules.rules_file import Rule, RuleSet
from appliance.trigger import MODES, TRIGGERS
from appliance.tuning import tuning_for

from support.appliance.random_rules import random_events, random_rule_set
from support.lambda_rules import LAMBDA_RULES, book_and_naive

pytestmark = pytest.mark.spark

SEEDS = (1, 2, 3, 4)


def records(spark, values: list[bytes]):
    now = datetime.datetime(2026, 1, 1)
    rows = [(None, v, "events", i % 2, i, now, 0) for i, v in enumerate(values)]
    return spark.createDataFrame(rows, KAFKA_READ_SCHEMA)


def outputs(df) -> list[tuple]:
    """Every output row, order-free and comparable: alert JSON parsed (its field order is
    fixed, but parsed keeps the comparison readable on failure)."""
    out = []
    for r in df.collect():
        headers = tuple((h.key, bytes(h.value)) for h in r.headers) if r.headers else ()
        out.append((r.topic, bytes(r.key) if r.key else b"",
                    json.dumps(json.loads(r.value), sort_keys=True), headers))
    return sorted(out)


@pytest.mark.parametrize("seed", SEEDS)
def test_book_and_naive_agree_record_for_record(sql_spark, seed):
    rule_set = random_rule_set(seed, count=80 + 30 * seed)
    values = random_events(seed, count=1500)
    book = RuleBook.holding(sql_spark, rule_set)
    try:
        indexed = outputs(transform(records(sql_spark, values), book, TopicsConfig()))
        stats = book.stats()
    finally:
        book.close()
    naive = outputs(transform(records(sql_spark, values), NaiveRules(rule_set),
                              TopicsConfig()))
    assert len(indexed) == len(naive)
    assert indexed == naive
    topics = {row[0] for row in indexed}
    assert topics == {"alerts", "events.dlq"}, topics  # both kinds were exercised
    # ...and the index did its job: most rules were skipped for most events.
    valid = stats.events
    evaluated = sum(r.evaluated for r in stats.rules)
    assert valid > 0 and evaluated < 0.6 * valid * len(rule_set), (evaluated, valid)
    assert sum(1 for r in stats.rules if r.index_key) > len(rule_set) // 3


def test_rules_compiled_in_several_chunks_each_keep_their_own_when(sql_spark):
    """Spark compiles the rules in projections of 500 side by side (``RuleCompiler``): over
    three chunks, every rule still alerts on exactly the events its own ``when`` matches."""
    count = 1_300
    rule_set = RuleSet.of([Rule(f"r{i}", "info", f"metric = 'm{i}' AND value >= {i % 5}",
                                f"rule {i}") for i in range(count)])
    events = [(f"e{i}-{v}", f"m{i}", v) for i in range(0, count, 7) for v in (0, 2, 4)]
    values = [json.dumps({"event_id": e, "ts": 1, "source": "s", "metric": m,
                          "value": v}).encode() for e, m, v in events]
    book = RuleBook.holding(sql_spark, rule_set)
    try:
        alerts = {json.loads(value)["event_id"]: [r["id"] for r in json.loads(value)["rules"]]
                  for topic, _key, value, _headers in
                  outputs(transform(records(sql_spark, values), book, TopicsConfig()))
                  if topic == "alerts"}
    finally:
        book.close()
    expected = {e: [f"r{m[1:]}"] for e, m, v in events if v >= int(m[1:]) % 5}
    assert alerts == expected


def test_a_rule_that_raises_fails_both_and_the_book_names_it(sql_spark):
    rule_set = RuleSet.of([
        Rule("fine", "info", "metric = 'cpu.util' AND value > 1", "fine"),
        Rule("guard", "critical", "metric = 'disk' AND assert_true(value < 1000) IS NULL",
             "guard"),
    ])
    values = [json.dumps({"event_id": f"e{i}", "ts": 1, "source": "s", "metric": m,
                          "value": v}).encode()
              for i, (m, v) in enumerate([("cpu.util", 5), ("disk", 5000), ("disk", 1)])]
    book = RuleBook.holding(sql_spark, rule_set)
    try:
        with pytest.raises(Exception) as indexed:
            transform(records(sql_spark, values), book, TopicsConfig()).collect()
    finally:
        book.close()
    with pytest.raises(Exception) as naive:
        transform(records(sql_spark, values), NaiveRules(rule_set), TopicsConfig()).collect()
    assert "value < 1000" in str(naive.value)
    assert "rule 'guard' failed on an event" in str(indexed.value)
    assert "value < 1000" in str(indexed.value)
    # Indexed under metric = 'disk', the guard never runs for other metrics: as in Spark,
    # whose AND stops at the first false conjunct.
    ok = [v for v in values if b"5000" not in v]
    book = RuleBook.holding(sql_spark, rule_set)
    try:
        assert outputs(transform(records(sql_spark, ok), book, TopicsConfig())) == \
            outputs(transform(records(sql_spark, ok), NaiveRules(rule_set), TopicsConfig()))
    finally:
        book.close()


def _write(bootstrap: str, topic: str, values: list[bytes]) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    for i, v in enumerate(values):
        producer.send(topic, value=v, partition=i % 2)
    producer.flush()
    producer.close()


def _read(bootstrap: str, topic: str, expected: int, timeout: float) -> list[tuple]:
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             enable_auto_commit=False, consumer_timeout_ms=1000)
    found: dict[tuple, None] = {}
    deadline = time.monotonic() + timeout
    try:
        while len(found) < expected and time.monotonic() < deadline:
            for r in consumer:
                headers = tuple((k, bytes(v)) for k, v in (r.headers or []))
                found[(bytes(r.key or b""), json.dumps(json.loads(r.value), sort_keys=True),
                       headers)] = None
    finally:
        consumer.close()
    return sorted(found)


@pytest.mark.parametrize("trigger", TRIGGERS)
def test_streaming_in_each_trigger_agrees_with_the_naive_query(sql_spark, broker, new_topic,
                                                              tmp_path, trigger):
    """The book in a running query: epochs (continuous) or batches (micro-batch, real-time)
    ask it for their version; outputs equal the naive query's over the same records."""
    mode = MODES[trigger]
    rule_set = random_rule_set(11, count=120)
    values = random_events(11, count=1000)
    events = new_topic(2)
    _write(broker.bootstrap, events, values)
    expected = len(outputs(transform(records(sql_spark, values), NaiveRules(rule_set),
                                     TopicsConfig())))
    tuning = tuning_for(mode)
    interval = "5 seconds" if trigger == "realtime" else "1 second"

    def run(name: str, rules) -> list[tuple]:
        """One query at a time: a local[2] session holds the long-running tasks of one
        continuous or real-time query over two partitions, not two."""
        out = new_topic(2)
        spec = StreamSpec(
            name=f"diff-{trigger}-{name}",
            reader_options={"subscribe": events, "startingOffsets": "earliest",
                            "kafka.bootstrap.servers": broker.bootstrap,
                            **tuning.source_options},
            writer_options={"kafka.bootstrap.servers": broker.bootstrap,
                            **tuning.sink_options},
            checkpoint=str(tmp_path / name), output_mode=mode.output_mode,
            trigger=mode.trigger_kwargs(interval),
            topics=TopicsConfig(events=events, alerts=out, dead_letters=out),
            latency_headers=False)
        query = stream_writer(sql_spark, rules, spec).start()
        try:
            return _read(broker.bootstrap, out, expected, 120)
        finally:
            query.stop()

    book = RuleBook.holding(sql_spark, rule_set)
    try:
        indexed = run("book", book)
        frontier = book.frontier()
    finally:
        book.close()
    naive = run("naive", NaiveRules(rule_set))
    assert len(indexed) == expected
    assert indexed == naive
    # The query's tasks asked the book by epoch or batch (not as a batch query would).
    assert frontier >= 0


# -- concurrent tasks: each evaluates its own copy of a rule ----------------------------

def test_lambda_rules_in_concurrent_tasks_match_what_spark_matches(sql_spark):
    """Two tasks at once (local[2], 2 partitions) over the same lambda rules
    (``lambda_rules``): every hot event matches every rule and no cold one does, as in the
    plan-compiled query."""
    per_partition = 40_000
    assert sql_spark.sparkContext.defaultParallelism == 2
    found = book_and_naive(sql_spark, per_partition, partitions=2)
    expected = {f"l{i}": per_partition for i in range(len(LAMBDA_RULES))}
    assert found["naive"] == expected
    assert found["book"] == expected


# -- rules that raise: the book fails exactly the events the plan-compiled query fails ------

def _event(metric: str, value: float, source: str = "host-1", tags: dict | None = None) -> bytes:
    event: dict = {"event_id": "e", "ts": 1, "source": source, "metric": metric, "value": value}
    if tags is not None:
        event["tags"] = tags
    return json.dumps(event).encode()


#: A rule that can raise, and events: Spark raises for some (an absent tag makes the key
#: NULL and its AND goes on; an interval cast raises whatever ANSI says), not for others.
RAISING = [
    ("tags['env'] = 'prod' AND assert_true(value < 1000) IS NULL",
     [_event("cpu", 5000), _event("cpu", 5000, tags={"env": "dev"}),
      _event("cpu", 5, tags={"env": "prod"})]),
    ("metric IN ('disk', NULL) AND assert_true(value < 1000) IS NULL",
     [_event("cpu", 5000), _event("disk", 5)]),
    ("metric = 'disk' AND assert_true(value < 1000) IS NULL",  # metric is never NULL
     [_event("cpu", 5000), _event("disk", 5), _event("disk", 5000)]),
    ("CAST(source AS INTERVAL DAY) IS NULL AND metric = 'disk'",
     [_event("cpu", 1, source="host-1"), _event("disk", 1, source="3")]),
    ("CAST(CAST(value AS BIGINT) AS INTERVAL DAY) > INTERVAL '1' DAY AND metric = 'disk'",
     [_event("cpu", 1e300), _event("disk", 5)]),
    ("if(value > 1000, raise_error('too big'), true) AND tags['env'] = 'prod'",
     [_event("cpu", 5000, tags={"env": "dev"}), _event("cpu", 5, tags={"env": "prod"})]),
    # A threshold after a conjunct that can raise must not decide the rule: Spark raises
    # before it reaches the threshold, which is false for these events.
    ("assert_true(value < 1000) IS NULL AND value < 0",
     [_event("cpu", 5000), _event("cpu", 5)]),
    ("if(value > 1000, raise_error('too big'), true) AND value < 0 AND metric = 'cpu'",
     [_event("cpu", 5000), _event("cpu", 5), _event("cpu", -5)]),
]


def _verdict(spark, rules, value: bytes) -> str:
    """What the query makes of one event: its outputs, or that it failed."""
    try:
        return repr(outputs(transform(records(spark, [value]), rules, TopicsConfig())))
    except Exception:  # noqa: BLE001 - Py4JJavaError or Spark's exception: both "failed"
        return "failed"


@pytest.mark.parametrize("when, events", RAISING, ids=[w[:50] for w, _ in RAISING])
def test_a_rule_that_can_raise_fails_the_same_events_in_the_book_and_in_spark(sql_spark, when,
                                                                           events):
    rule_set = RuleSet.of([Rule("r", "info", when, "r")])
    naive = [_verdict(sql_spark, NaiveRules(rule_set), v) for v in events]
    assert "failed" in naive  # each case has an event Spark fails
    book = RuleBook.holding(sql_spark, rule_set)
    try:
        indexed = [_verdict(sql_spark, book, v) for v in events]
    finally:
        book.close()
    assert indexed == naive


# -- thresholds: a comparison checked before eval decides exactly what Spark decides --------

EDGE_VALUES = (0.0, -0.0, 90.0, 89.999, 90.000001, 1e308, -1e308, 5e-324, -5e-324, 42)


def test_thresholds_decide_edge_values_as_spark_does(sql_spark):
    """Rules the book checks by a primitive comparison first (``Threshold.java``): at their
    bounds, around zero and at the ends of the doubles, the same alerts as the plan-compiled
    query, record for record."""
    bounds = (0, -0.0, 90, 89.999, 1e308, -1e308, 5e-324)
    whens = [f"value {op} {b}" for op in (">", ">=", "<", "<=") for b in bounds]
    whens += [f"{b} < value" for b in bounds] + ["ts > 0 AND value >= 90 AND value < 1e308",
                                                  "metric = 'cpu' AND value <= 0"]
    rule_set = RuleSet.of([Rule(f"t{i}", "info", w, "m") for i, w in enumerate(whens)])
    values = [json.dumps({"event_id": f"e{i}", "ts": t, "source": "s", "metric": "cpu",
                          "value": v}).encode()
              for i, (v, t) in enumerate((v, t) for v in EDGE_VALUES for t in (0, 1))]
    book = RuleBook.holding(sql_spark, rule_set)
    try:
        indexed = outputs(transform(records(sql_spark, values), book, TopicsConfig()))
    finally:
        book.close()
    naive = outputs(transform(records(sql_spark, values), NaiveRules(rule_set), TopicsConfig()))
    assert len(naive) == len(values)  # every event matched some rule
    assert indexed == naive
