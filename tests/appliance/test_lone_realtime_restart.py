"""A lone real-time instance's next run starts where this one got, not at the start of the
batch it was in (a real-time batch commits only at its end, minutes away):

- stopped (SIGTERM, ``Appliance.stop``), it ends its batch first and Spark commits it
  (``appliance.process.query_stop``, the trigger table's ``stop_at``);
- crashed, it kept its query's durable progress in its checkpoint
  (``appliance.query.progress_file``, ``appliance.process.lone_progress``), used only when
  sound: every partition named, none past the topic's end, ahead of the checkpoint.

The runs have a 10-minute batch, longer than the test, so nothing else commits it.
Against the shared broker and the session's Spark."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from appliance.config import Config
from appliance.process import lone_progress
from appliance.process.lone_progress import LoneProgress
from appliance.process.runner import Appliance
from appliance.query import progress_file
from appliance.query.checkpoint import committed_offsets
from appliance.trigger import MODES, StopAt

from support.appliance_mix import MIX_RULES, one_alert_event
from support.kafka_io import consume, produce


def write_commit(checkpoint: Path, batch: int, topic: str, offsets: dict[int, int]) -> None:
    """A committed batch as Spark writes it: ``offsets/N`` (two header lines, then the
    source's offsets) and ``commits/N``."""
    for name in ("offsets", "commits"):
        (checkpoint / name).mkdir(parents=True, exist_ok=True)
    (checkpoint / "offsets" / str(batch)).write_text(
        "v1\n{}\n" + json.dumps({topic: {str(p): o for p, o in offsets.items()}}) + "\n")
    (checkpoint / "commits" / str(batch)).write_text("v1\n{}\n")


def test_the_file_keeps_one_topics_offsets_and_a_torn_one_counts_as_none(tmp_path):
    progress_file.save(tmp_path, "events", {1: 7, 0: 4})
    assert progress_file.load(tmp_path, "events") == {0: 4, 1: 7}
    assert progress_file.load(tmp_path, "other") == {}  # the config names a new topic
    assert progress_file.load(tmp_path / "none", "events") == {}
    progress_file.path(tmp_path).write_text('{"topic": "events", "offs')
    assert progress_file.load(tmp_path, "events") == {}
    assert [p.name for p in tmp_path.iterdir()] == [progress_file.NAME]  # no temp file left


@pytest.fixture
def topic_with_events(broker, new_topic):
    topic = new_topic(2)
    produce(broker.bootstrap, topic, [one_alert_event(f"e{i}") for i in range(8)])  # 4 a partition
    return topic


@pytest.mark.parametrize("kept, committed, resumes, reason", [
    ({0: 3, 1: 4}, {0: 1, 1: 4}, {"0": 3, "1": 4}, None),  # ahead in one partition
    ({0: 3, 1: 2}, {0: 1, 1: 4}, {"0": 3, "1": 4}, None),  # each the newer of the two
    ({0: 3, 1: 4}, {0: 3, 1: 4}, None, None),  # a clean stop committed it all
    ({0: 3, 1: 4}, {0: 4, 1: 4}, None, None),  # the checkpoint is ahead
    ({}, {0: 1, 1: 1}, None, None),  # nothing kept
    ({0: 3}, {}, None, "every partition"),
    ({0: 3, 1: 9}, {}, None, "end offsets"),  # partition 1 ends at 4
])
def test_a_restart_starts_from_kept_offsets_only_when_they_are_sound(
        broker, topic_with_events, tmp_path, kept, committed, resumes, reason):
    checkpoint = tmp_path / "checkpoint"
    checkpoint.mkdir()
    if committed:
        write_commit(checkpoint, 0, topic_with_events, committed)
    if kept:
        progress_file.save(checkpoint, topic_with_events, kept)
    lone = LoneProgress(lambda topic: {}, topic_with_events, str(checkpoint),
                        lambda: {"bootstrap_servers": broker.bootstrap})
    with capture_logs() as logged:
        start = lone.resume(partitions=2)
    ignored = [e for e in logged if e["event"] == "query.progress_ignored"]
    if resumes is None:
        assert start is None and checkpoint.is_dir()
        assert [reason in e["reason"] for e in ignored] == ([True] if reason else [])
    else:
        assert json.loads(start) == {topic_with_events: resumes}
        assert not checkpoint.exists()  # moved aside: Spark must not resume from it
        assert (tmp_path / "checkpoint.stale" / progress_file.NAME).is_file()
        assert [e["event"] for e in logged] == ["query.resume_from_progress"]


def test_saves_are_a_second_apart_and_only_when_the_offsets_moved(tmp_path, monkeypatch):
    offsets, reads = {0: 4, 1: 2}, []

    def processed(topic):
        reads.append(topic)
        return dict(offsets)

    lone = LoneProgress(processed, "events", str(tmp_path), dict)
    lone.save()
    offsets[0] = 5
    lone.save()  # within the second: not even read
    assert reads == ["events"] and progress_file.load(tmp_path, "events") == {0: 4, 1: 2}

    monkeypatch.setattr(lone_progress, "SAVE_EVERY_S", 0.0)
    lone = LoneProgress(processed, "events", str(tmp_path), dict)
    lone.save()
    assert progress_file.load(tmp_path, "events") == {0: 5, 1: 2}
    progress_file.path(tmp_path).unlink()
    lone.save()  # the same offsets: not written again
    assert not progress_file.path(tmp_path).exists()
    offsets.clear()
    lone.save()  # nothing processed yet (a fresh query): nothing to keep
    assert not progress_file.path(tmp_path).exists()


@dataclass(frozen=True)
class RealtimeRun:
    """A lone real-time appliance's config, and the events of its two runs."""

    config: Config
    spark: object
    events: str
    alerts: str
    first_ids: list[str]
    then_ids: list[str]

    @property
    def checkpoint(self) -> Path:
        return Path(self.config.query.checkpoint_dir)

    def second_run(self, bootstrap: str) -> tuple[Counter, list[dict]]:
        """Start again on the checkpoint, send the second events: how often each event
        alerted over both runs, and what the second start logged."""
        second = Appliance(self.config, spark=self.spark)
        try:
            with capture_logs() as logged:
                second.start(threading.Event())
            produce(bootstrap, self.events, [one_alert_event(i) for i in self.then_ids])
            records = consume(bootstrap, self.alerts, 16, timeout=60)
        finally:
            second.stop()
        return Counter(json.loads(v)["event_id"] for _k, v in records), logged


@pytest.fixture
def realtime_run(broker, new_topic, appliance_spark, tmp_path):
    rules = tmp_path / "rules.yml"
    rules.write_text(MIX_RULES)
    events, alerts = new_topic(2), new_topic(1)
    config = Config.model_validate({
        "kafka": {"bootstrap_servers": broker.bootstrap},
        "topics": {"events": events, "alerts": alerts, "dead_letters": new_topic(1)},
        "query": {"trigger": "realtime", "interval": "10 minutes",
                  "checkpoint_dir": str(tmp_path / "checkpoint"), "warmup": False},
        "rules": {"path": str(rules)}, "metrics": {"port": 0}})
    tag = uuid.uuid4().hex[:8]
    return RealtimeRun(config, appliance_spark, events, alerts,
                       [f"{tag}-a{i}" for i in range(8)], [f"{tag}-b{i}" for i in range(8)])


def test_only_realtime_ends_its_batch_before_it_stops():
    assert {m.name: m.stop_at for m in MODES.values()} == {
        "continuous": StopAt.ANYWHERE, "realtime": StopAt.BATCH_END,
        "microbatch": StopAt.ANYWHERE}


@pytest.mark.spark
def test_a_stopped_batch_is_committed_and_the_next_run_reads_none_of_it_again(
        broker, realtime_run):
    run = realtime_run
    first = Appliance(run.config, spark=run.spark)
    try:
        first.start(threading.Event())
        produce(broker.bootstrap, run.events, [one_alert_event(i) for i in run.first_ids])
        assert len(consume(broker.bootstrap, run.alerts, 8, timeout=60)) == 8
        assert committed_offsets(run.checkpoint) == {}  # mid-batch
    finally:
        with capture_logs() as logged:
            first.stop()
    ended = [e for e in logged if e["event"] == "query.batch_ended"]
    assert len(ended) == 1 and ended[0]["seconds"] < 15, logged
    assert committed_offsets(run.checkpoint) == {run.events: {0: 4, 1: 4}}
    alerted, _ = run.second_run(broker.bootstrap)
    assert alerted == Counter(run.first_ids + run.then_ids), alerted  # each once


@pytest.mark.spark
def test_after_a_crash_mid_batch_the_next_run_reads_none_of_it_again(broker, realtime_run):
    run = realtime_run
    first = Appliance(run.config, spark=run.spark)
    stop = threading.Event()
    serving = threading.Thread(target=first.serve, args=(stop,))
    try:
        first.start(threading.Event())
        serving.start()
        produce(broker.bootstrap, run.events, [one_alert_event(i) for i in run.first_ids])
        assert len(consume(broker.bootstrap, run.alerts, 8, timeout=60)) == 8
        deadline = time.monotonic() + 20
        while progress_file.load(run.checkpoint, run.events) != {0: 4, 1: 4} \
                and time.monotonic() < deadline:
            time.sleep(0.2)
        assert progress_file.load(run.checkpoint, run.events) == {0: 4, 1: 4}
    finally:
        stop.set()
        serving.join(timeout=60)
        # The crash: the query ends mid-batch, its batch never committed.
        if first.probes.query is not None:
            first.probes.query.stop()
        first.stop()
    assert committed_offsets(run.checkpoint) == {}
    alerted, logged = run.second_run(broker.bootstrap)
    resumed = [e for e in logged if e["event"] == "query.resume_from_progress"]
    assert [e["offsets"] for e in resumed] == [{"0": 4, "1": 4}], logged
    assert alerted == Counter(run.first_ids + run.then_ids), alerted  # each once
