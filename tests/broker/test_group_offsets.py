"""The committed-offsets log under --data-dir: replay, torn tails, compaction, the old file.

The broker-level proofs (kill -9 and restart with real consumers) are in
test_groups_*.py and test_durability.py; these pin the log's own recovery rules.
"""

from __future__ import annotations

import json

from appliance.broker.groups import offsets as group_offsets
from appliance.broker.groups.offsets import Committed, OffsetKey, OffsetStore


def _c(offset: int) -> Committed:
    return Committed(offset, -1, "m", 1_700_000_000_000)


def test_replay_restores_commits_deletes_and_generations(tmp_path):
    s = OffsetStore(str(tmp_path))
    s.commit("g", [(OffsetKey("t", 0), _c(5)), (OffsetKey("t", 1), _c(7))])
    s.commit("g", [(OffsetKey("t", 0), _c(9))])
    s.commit("h", [(OffsetKey("u", 0), _c(1))])
    s.record_generation("g", 4, "consumer")
    s.delete_offsets("g", [OffsetKey("t", 1)])
    s.forget_topic("u")
    s.close()
    again = OffsetStore(str(tmp_path))
    assert again.committed("g") == {OffsetKey("t", 0): _c(9)}
    assert again.fetch("h", "u", 0) is None and not again.has_offsets("h")
    assert again.group_record("g") == group_offsets.GroupRecord(4, "consumer")
    assert again.groups() == ["g"]
    again.delete_group("g")
    again.close()
    assert OffsetStore(str(tmp_path)).groups() == []


def test_a_stable_groups_members_replay_and_a_log_from_before_them_still_reads(tmp_path):
    stable = {"protocol": "range", "leader": "m1", "members": [
        ["m1", None, "c", "/127.0.0.1", 6000, 10000, [["range", "AAE="]], "AAI="]]}
    s = OffsetStore(str(tmp_path))
    s.record_generation("g", 3, "consumer", stable)
    s.record_generation("h", 2, "consumer", stable)
    s.record_generation("h", 3, "consumer")  # h rebalances: its members are dropped
    s.close()
    with (tmp_path / group_offsets.LOG_NAME).open("a") as log:  # a line as older brokers wrote
        log.write(json.dumps({"g": ["old", 7, "consumer"]}) + "\n")
    again = OffsetStore(str(tmp_path))
    assert again.group_record("g") == group_offsets.GroupRecord(3, "consumer", stable)
    assert again.group_record("h") == group_offsets.GroupRecord(3, "consumer", None)
    assert again.group_record("old") == group_offsets.GroupRecord(7, "consumer", None)
    again._compact()  # the rewrite keeps them
    again.close()
    assert OffsetStore(str(tmp_path)).group_record("g").stable == stable


def test_a_torn_last_line_is_dropped_and_the_log_stays_appendable(tmp_path):
    s = OffsetStore(str(tmp_path))
    s.commit("g", [(OffsetKey("t", 0), _c(5))])
    s.close()
    path = tmp_path / group_offsets.LOG_NAME
    good = path.read_bytes()
    path.write_bytes(good + b'{"c":["g","t",0,99')  # killed mid-write: never acknowledged
    again = OffsetStore(str(tmp_path))
    assert again.fetch("g", "t", 0) == _c(5)
    assert path.read_bytes() == good  # cut back to the last whole line
    again.commit("g", [(OffsetKey("t", 0), _c(6))])
    again.close()
    assert OffsetStore(str(tmp_path)).fetch("g", "t", 0) == _c(6)


def test_the_log_is_compacted_when_it_outgrows_the_live_entries(tmp_path, monkeypatch):
    monkeypatch.setattr(group_offsets, "_COMPACT_MIN_LINES", 50)
    s = OffsetStore(str(tmp_path))
    for i in range(200):
        s.commit("g", [(OffsetKey("t", i % 3), _c(i))])
    s.close()
    lines = (tmp_path / group_offsets.LOG_NAME).read_text().splitlines()
    assert len(lines) < 60  # rewritten with only the live entries, then appended to
    again = OffsetStore(str(tmp_path))
    assert {k.partition: v.offset for k, v in again.committed("g").items()} == {
        0: 198, 1: 199, 2: 197}


def test_an_older_offsets_file_is_carried_over_once(tmp_path):
    (tmp_path / group_offsets.LEGACY_NAME).write_text(json.dumps(
        {"g": {"t": {"0": [12, 3, "meta"], "2": [4, -1, None]}}}))
    s = OffsetStore(str(tmp_path))
    assert s.fetch("g", "t", 0)[:3] == (12, 3, "meta")
    assert s.fetch("g", "t", 2).offset == 4
    s.close()
    assert not (tmp_path / group_offsets.LEGACY_NAME).exists()
    assert OffsetStore(str(tmp_path)).fetch("g", "t", 0).offset == 12


def test_in_memory_store_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    s = OffsetStore(None)
    s.commit("g", [(OffsetKey("t", 0), _c(1))])
    assert s.fetch("g", "t", 0) == _c(1)
    assert list(tmp_path.iterdir()) == []
