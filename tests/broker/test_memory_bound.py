"""The broker's memory does not grow with the data (issue 46, item 1), compressed into a
few minutes: a gigabyte through a broker subprocess, durable and in memory, its peak
resident memory (VmHWM) within the bound docs/broker.md states (``memory_bound``), and
every record from the log start to the end readable at its offset after retention has
deleted the rest. The hours-long version is ``make soak`` (tests/faults/test_soak.py)."""

from __future__ import annotations

import time

from appliance.broker import EmbeddedBroker
from appliance.broker.memory_bound import MIB, Load, bound
from appliance.broker.settings import BrokerConfig
from appliance.broker.wire import schemas
from appliance.broker.wire.client import WireClient
from bench._broker_load import process_memory, produce, read_back, sequenced_batch

RECORD = 64 * 1024
PER_BATCH = 15  # 960 KiB: under max.message.bytes
GIB = 1 << 30


def _pump(bootstrap: str, topic: str, total: int) -> int:
    """Produce ``total`` bytes of sequenced records; returns the records sent."""
    sent = 0
    with WireClient(bootstrap, timeout=60) as c:
        for _ in range(total // (RECORD * PER_BATCH) + 1):
            assert produce(c, topic, sequenced_batch(sent, PER_BATCH, RECORD)) == sent
            sent += PER_BATCH
    return sent


def test_a_gigabyte_through_a_durable_broker_in_bounded_memory(tmp_path):
    budget = 256 * MIB
    args = ["--topics", "soak:1", "--retention-total-bytes", str(budget),
            "--retention-total-policy", "keep-newest", "--segment-bytes", str(32 * MIB)]
    with EmbeddedBroker(data_dir=tmp_path / "data", extra_args=args,
                        log_path=tmp_path / "b.log") as b:
        started = time.monotonic()
        sent = _pump(b.bootstrap, "soak", GIB)
        pumped_s = time.monotonic() - started
        back = read_back(b.bootstrap, "soak")
        mem = process_memory(b.proc.pid)
        limit = bound(BrokerConfig(data_dir="x", retention_total_bytes=budget),
                      Load(connections=2, partitions=1, segments=budget // (32 * MIB) + 2,
                           request_bytes=PER_BATCH * RECORD + 4096))
        print(f"\n{sent * RECORD / GIB:.2f} GiB in {pumped_s:.0f} s; read back "
              f"{back.records} records ({back.bytes / MIB:.0f} MiB) from offset {back.start} "
              f"in {back.seconds:.1f} s; peak RSS {mem.peak / MIB:.1f} MiB, bound "
              f"{limit.total / MIB:.1f} MiB ({limit.describe()})")
        assert back.end == sent and back.start > 0  # retention moved the log start
        assert back.records == back.end - back.start
        assert mem.peak < limit.total
        b.restart()  # a clean stop: the restart reads indexes, not records
        back = read_back(b.bootstrap, "soak")
        assert back.end == sent and back.records == back.end - back.start
        assert process_memory(b.proc.pid).peak < limit.total


def test_a_gigabyte_through_an_in_memory_broker_keeps_to_its_budget(tmp_path):
    budget = 128 * MIB
    args = ["--topics", "soak:1", "--retention-total-bytes", str(budget),
            "--retention-total-policy", "keep-newest"]
    with EmbeddedBroker(extra_args=args, log_path=tmp_path / "b.log") as b:
        sent = _pump(b.bootstrap, "soak", GIB)
        back = read_back(b.bootstrap, "soak")
        mem = process_memory(b.proc.pid)
        limit = bound(BrokerConfig(retention_total_bytes=budget),
                      Load(connections=2, partitions=1, segments=0,
                           request_bytes=PER_BATCH * RECORD + 4096))
        print(f"\nread back {back.records} records from offset {back.start}; peak RSS "
              f"{mem.peak / MIB:.1f} MiB, bound {limit.total / MIB:.1f} MiB "
              f"({limit.describe()})")
        assert back.end == sent and back.start > 0
        assert back.records == back.end - back.start
        assert mem.peak < limit.total


def test_the_docs_state_the_bound_the_code_computes():
    """docs/broker.md's formula is memory_bound's: the same terms and figures."""
    import re
    from pathlib import Path

    from appliance.broker import memory_bound as mb

    doc = (Path(__file__).resolve().parents[2] / "docs" / "broker.md").read_text()
    formula = doc.split("```text\nRSS ≤", 1)[1].split("```", 1)[0]
    config = BrokerConfig()
    assert f"fixed                                     {mb.BASE // MIB} MiB" in formula
    assert f"connections × {mb.per_connection(config) / MIB:.1f} MiB" in formula
    assert (f"partitions × ({mb.PARTITION_STATE // 1024} KiB + producers × "
            f"{mb.PRODUCER_STATE} B)") in formula
    assert f"segments × {mb.SEGMENT_STATE // 1024} KiB" in formula
    assert (f"groups × ({mb.GROUP_STATE // 1024} KiB + partitions × "
            f"{mb.ASSIGNED_PARTITION // 1024} KiB)") in formula
    assert f"members × {mb.MEMBER_STATE // 1024} KiB" in formula
    assert f"committed offsets × {mb.COMMITTED_OFFSET} B" in formula
    terms = set(bound(config, Load(1, 1, 1, 1, groups=1, members=1,
                                   committed_offsets=1)).terms)
    mentioned = {"fixed", "request", "decompression", "request pool", "connections",
                 "partitions", "segments", "groups", "committed offsets", "log cleaner",
                 "log (in memory)"}
    assert terms == mentioned
    assert re.search(r"3 × the request being handled", formula)


def _heartbeat(c: WireClient, group: str, member: str, epoch: int, topics) -> dict:
    return c.request(schemas.CONSUMER_GROUP_HEARTBEAT, 1, {
        "group_id": group, "member_id": member, "member_epoch": epoch,
        "instance_id": None, "rack_id": None, "rebalance_timeout_ms": 60000,
        "subscribed_topic_names": topics if epoch == 0 else None,
        "subscribed_topic_regex": None, "server_assignor": None, "topic_partitions": []})


def test_consumer_groups_stay_within_their_terms_of_the_bound(tmp_path):
    """KIP-848 groups whose members subscribe to every topic (each partition its own
    topic: an assignment's worst case) and classic groups with committed offsets on every
    partition: the broker's growth stays within the bound's groups and committed-offsets
    terms for that load."""
    topics = [f"t{i:03d}" for i in range(150)]
    kip848_groups, members, classic_groups = 60, 10, 60
    config = BrokerConfig(groups_max_metadata_bytes=8 * MIB)  # the subscriptions: 6.1 MB
    args = ["--topics", ",".join(f"{t}:1" for t in topics),
            "--groups-max-metadata-bytes", str(config.groups_max_metadata_bytes),
            "--group-consumer-session-timeout-ms", "600000"]
    with EmbeddedBroker(extra_args=args, log_path=tmp_path / "b.log") as b, \
            WireClient(b.bootstrap, timeout=60) as c:
        for i in range(3):  # the code paths warmed up: their first use is not the groups'
            _heartbeat(c, "warm-up", f"w{i}", 0, topics[:2])
        c.request(schemas.OFFSET_COMMIT, 8, _commit_body("warm-up-classic", topics[:1]))
        before = process_memory(b.proc.pid)
        for g in range(kip848_groups):
            joined = []
            for m in range(members):
                resp = _heartbeat(c, f"kip848-{g}", f"m{m}", 0, topics)
                assert resp["error_code"] == 0, resp
                joined.append((resp["member_id"], resp["member_epoch"]))
            for member_id, epoch in joined:  # each learns its share
                assert _heartbeat(c, f"kip848-{g}", member_id, epoch, topics)[
                    "error_code"] in (0, 110)  # or fenced: a newer epoch is out
        for g in range(classic_groups):
            resp = c.request(schemas.OFFSET_COMMIT, 8, _commit_body(f"classic-{g}", topics))
            assert {p["error_code"] for t in resp["topics"] for p in t["partitions"]} == {0}
        after = process_memory(b.proc.pid)
    terms = bound(config, Load(
        connections=1, partitions=len(topics), segments=0, request_bytes=0,
        groups=kip848_groups + classic_groups, members=kip848_groups * members,
        committed_offsets=classic_groups * len(topics))).terms
    allowed = terms["groups"] + terms["committed offsets"]
    grown = after.peak - before.rss
    print(f"\n{kip848_groups} KIP-848 groups x {members} members x {len(topics)} topics, "
          f"{classic_groups} classic groups x {len(topics)} offsets: grew "
          f"{grown / MIB:.1f} MiB ({grown / (kip848_groups * members) / 1024:.1f} KiB a "
          f"member with its share), allowed {allowed / MIB:.1f} MiB")
    assert grown < allowed


def _commit_body(group: str, topics) -> dict:
    return {"group_id": group, "generation_id": -1, "member_id": "",
            "group_instance_id": None, "topics": [
                {"name": t, "partitions": [{"partition_index": 0, "committed_offset": 1,
                                            "committed_leader_epoch": -1,
                                            "committed_metadata": None}]} for t in topics]}
