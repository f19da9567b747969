"""The whole appliance against a real embedded broker and a real local Spark, per trigger.

The known mix goes in; exactly the expected alerts and dead letters must come out (no
valid event dead-lettered, no bad record alerted). The query runs in-process on the
session's shared SparkSession so the three modes cost one JVM.
"""

from __future__ import annotations

import json
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from appliance.config import Config
from appliance.ha.kafka_offsets import reset_checkpoint
from appliance.process.reload_status import ReloadResult
from appliance.process.runner import Appliance
from appliance.query.warmup import MIN_RECORDS
from appliance.rules.rules_file import RulesError

from support.appliance_mix import check_outputs, make_mix
from support.kafka_io import consume, produce, rules_alerted
from support.short_intervals import SHORT_INTERVALS

pytestmark = pytest.mark.spark

INTERVALS = SHORT_INTERVALS


def topic_config(new_topic, broker, tmp_path, trigger: str, rules_yaml: str) -> Config:
    rules = tmp_path / "rules.yml"
    rules.write_text(rules_yaml)
    return Config.model_validate({
        "kafka": {"bootstrap_servers": broker.bootstrap},
        "topics": {"events": new_topic(2), "alerts": new_topic(1), "dead_letters": new_topic(1),
                   "warmup": new_topic(2)},  # exists: the warm-up goes through Kafka
        "query": {"trigger": trigger, "interval": INTERVALS[trigger],
                  "checkpoint_dir": str(tmp_path / "checkpoint"),
                  # the streaming warm-up too (micro-batch only; off by default)
                  "warmup_batches": 3},
        "rules": {"path": str(rules)},
        "metrics": {"port": 0},
    })


def warmup_alert_seen(records: list[tuple]) -> bool:
    """A synthetic alert of the warm-up's own rule (``appliance.query.warmup.WARMUP_RULE``)."""
    return any(b'"id":"appliance-warmup"' in v for _k, v in records)


@contextmanager
def running(config: Config, spark, records: list[bytes]):
    """The appliance started on ``spark`` with ``records`` produced to its events topic;
    stopped on exit."""
    appliance = Appliance(config, spark=spark)
    try:
        appliance.start()
        produce(config.kafka.bootstrap_servers, config.topics.events, records)
        yield appliance
    finally:
        appliance.stop()


@pytest.mark.parametrize("trigger", ["continuous", "realtime", "microbatch"])
def test_known_mix_in_each_trigger_mode(trigger, broker, new_topic, appliance_spark, tmp_path):
    mix = make_mix(trigger)
    config = topic_config(new_topic, broker, tmp_path, trigger, mix.rules_yaml)
    with running(config, appliance_spark, mix.records) as appliance:
        alerts = consume(broker.bootstrap, config.topics.alerts, len(mix.alerts), 90)
        dead = consume(broker.bootstrap, config.topics.dead_letters, len(mix.dead_letters), 30)
        assert appliance.probes.failure() is None
        # the plan was warmed through Kafka before ready, the query's own plan (its rules
        # and the warm-up's in a rule book of its own) for the JIT's worth of records ...
        assert appliance.warmup.mode == "kafka"
        assert appliance.warmup.records >= MIN_RECORDS
        # micro-batch plans every batch again: its warm-up ran streaming micro-batches of
        # the query too, and stopped them (only the appliance's query is active)
        wanted = config.query.warmup_batches if config.query.mode.plans_every_batch else 0
        assert appliance.warmup.stream_batches == wanted
        assert [q.name for q in appliance.spark.streams.active] == ["appliance"]
        # ... and it ran the query's own generated classes: the query compiled none
        assert appliance.spark_side.query_new_classes() == 0
        warm = consume(broker.bootstrap, config.topics.warmup, warmup_alert_seen, 30)
    # ... on its own topic: its synthetic alerts and dead letters are there, and none of
    # them reached the real topics (check_outputs is exact)
    assert warmup_alert_seen(warm)
    check_outputs(mix, alerts, dead)


def test_query_that_dies_is_reported_with_its_cause(broker, new_topic, appliance_spark,
                                                   tmp_path):
    """A runtime error inside the query ends ``serve`` with 1 and the cause, not a hang."""
    rules = "rules:\n  - {id: guard, severity: info, when: \"assert_true(value < 1000) IS NULL\"}\n"
    config = topic_config(new_topic, broker, tmp_path, "microbatch", rules)
    with running(config, appliance_spark, [
            b'{"event_id": "big", "ts": 1, "source": "s", "metric": "m", "value": 5000}'
    ]) as appliance:
        stop = threading.Event()
        timer = threading.Timer(120, stop.set)  # bound: a hang fails the test, not CI
        timer.start()
        try:
            assert appliance.serve(stop) == 1
        finally:
            timer.cancel()
        assert "value < 1000" in appliance.probes.failure()


def test_rules_only_spark_can_reject_stop_the_start_before_the_query(
        broker, new_topic, appliance_spark, tmp_path):
    # The check without a JVM cannot see an array of maps' element type; Spark's analysis
    # at start-up refuses it before any query starts.
    rules = "rules:\n  - {id: deep, severity: info, when: \"array_contains(array(tags), 1)\"}\n"
    config = topic_config(new_topic, broker, tmp_path, "continuous", rules)
    appliance = Appliance(config, spark=appliance_spark)
    try:
        with pytest.raises(RulesError) as err:
            appliance.start()
        assert appliance.probes.query is None
    finally:
        appliance.stop()
    assert err.value.problems[0].startswith(
        f"{config.rules.path}: rule 'deep': when: [DATATYPE_MISMATCH")


def test_a_rule_failing_on_one_event_does_not_stop_the_stream(
        broker, new_topic, appliance_spark, tmp_path):
    """``cast('abc' AS int)`` raises under Spark 4's default ANSI mode; the appliance's
    session settings make it null (no match) instead of killing the query."""
    rules = ("rules:\n"
             "  - {id: bad-cast, severity: critical, when: \"cast(source AS int) > 0\"}\n"
             "  - {id: ok, severity: info, when: \"metric = 'm'\"}\n")
    config = topic_config(new_topic, broker, tmp_path, "microbatch", rules)
    with running(config, appliance_spark, [
            b'{"event_id": "e1", "ts": 1, "source": "abc", "metric": "m", "value": 1}'
    ]) as appliance:
        alerts = consume(broker.bootstrap, config.topics.alerts, 1, 60)
        assert appliance.probes.failure() is None and appliance.probes.active()
    assert [json.loads(v)["rules"] for _k, v in alerts] == [
        [{"id": "ok", "severity": "info", "message": "metric = 'm'"}]]
    assert appliance_spark.conf.get("spark.sql.ansi.enabled") == "true"  # shared one untouched


def _event(name: str, metric: str) -> bytes:
    return json.dumps({"event_id": name, "ts": 1, "source": "s", "metric": metric,
                       "value": 1}).encode()


def _rules(*metrics: str) -> str:
    return "rules:\n" + "".join(
        f"  - {{id: {m}, severity: info, when: \"metric = '{m}'\"}}\n" for m in metrics)


@pytest.mark.parametrize("trigger", ["continuous", "microbatch"])
def test_a_query_started_again_on_a_fresh_checkpoint_runs_and_takes_the_newest_rules(
        trigger, broker, new_topic, appliance_spark, tmp_path):
    """A pair's takeover in the same session: the query stops, its checkpoint goes aside
    and a new one starts, numbering its epochs or batches from 0 again, on the same rule
    book. It must run the newest rules, and a reload must take effect from its next
    generation. Before, the book took the new query's generations for replays of the old
    one's: it ran the rules of the old query's start, and a reload waited for the new
    query to pass the old one's last generation (the deploy test's new rule never
    alerted)."""
    config = topic_config(new_topic, broker, tmp_path, trigger, _rules("one"))
    rules_file, alerts = Path(config.rules.path), config.topics.alerts
    bootstrap = config.kafka.bootstrap_servers

    def alerted(prefix: str, count: int, timeout: float = 60) -> dict[str, list[str]]:
        """Rule ids per alerted event named ``prefix-*``, once ``count`` of them are in."""
        return rules_alerted(bootstrap, alerts, lambda eid: eid.startswith(f"{prefix}-"),
                             count, timeout)

    def reload(*metrics: str) -> None:
        rules_file.write_text(_rules(*metrics))
        outcome = appliance.rules_swap.reload()
        assert outcome.result is ReloadResult.APPLIED, outcome

    with running(config, appliance_spark, [_event("a-0", "one")]) as appliance:
        assert alerted("a", 1) == {"a-0": ["one"]}
        reload("one", "two")
        # The first query's generations climb (bounded: 40 rounds) well past where a
        # fresh one starts.
        book = appliance.rules.rule_book()
        for n in range(40):
            produce(bootstrap, config.topics.events, [_event(f"b-{n}", "two")])
            time.sleep(0.25)
            if book.frontier() >= 12:
                break
        assert book.frontier() >= 12, book.frontier()
        assert set(map(tuple, alerted("b", 1).values())) == {("two",)}
        # The takeover's steps: the query stops, the stale checkpoint goes aside, a new
        # query starts in the same session.
        appliance.probes.query.stop()
        assert reset_checkpoint(config.query.checkpoint_dir) is not None
        appliance.start_query(None)
        assert appliance.probes.wait_until_processing(60)
        produce(bootstrap, config.topics.events, [_event("c-0", "two")])
        assert alerted("c", 1) == {"c-0": ["two"]}  # the newest rules, not the first ones
        reload("one", "two", "three")
        produce(bootstrap, config.topics.events,
                [_event(f"d-{n}", "three") for n in range(4)])
        assert alerted("d", 4, timeout=30) == {f"d-{n}": ["three"] for n in range(4)}
        assert appliance.probes.failure() is None
