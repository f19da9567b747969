"""The transaction state's files: a torn last line (kill -9 mid-write) is cut and the rest
kept, any other damage refused; a partition's open and aborted transactions replay from
its log, and survive the log's rewrite; idle transactional ids expire, on disk too."""

from __future__ import annotations

import time

import pytest

from appliance.broker.settings import BrokerConfig
from appliance.broker.storage.json_lines import JsonLines
from appliance.broker.storage.partition_txns import (
    REWRITE_AFTER_LINES,
    AbortedTxn,
    PartitionTxns,
)
from appliance.broker.storage.topic_registry import TopicRegistry
from appliance.broker.txn.coordinator import ID_EXPIRATION_MS, TxnCoordinator
from appliance.broker.txn.state_store import TxnStateStore


def test_a_torn_last_line_is_cut_and_a_damaged_one_refused(tmp_path):
    path = tmp_path / "log"
    log = JsonLines(path, sync=False)
    log.append([{"a": 1}, {"b": 2}])
    with open(path, "ab") as f:
        f.write(b'{"c": ')  # the process died mid-write
    assert JsonLines(path, sync=False).read() == [{"a": 1}, {"b": 2}]
    assert path.read_bytes() == b'{"a":1}\n{"b":2}\n'
    path.write_bytes(b'{"a":1}\nnot json\n{"b":2}\n')
    with pytest.raises(ValueError, match="line 2"):
        JsonLines(path, sync=False).read()


def test_open_and_aborted_transactions_replay_and_survive_the_rewrite(tmp_path):
    txns = PartitionTxns.load(tmp_path, sync=False)
    txns.begin(7, 10)
    txns.begin(7, 12)  # already open: its first offset stays
    txns.begin(8, 11)
    txns.end(7, 20, committed=False)
    assert txns.last_stable_offset(30) == 11
    again = PartitionTxns.load(tmp_path, sync=False)
    assert again.open == {8: 11} and again.aborted == [AbortedTxn(7, 10, 20)]
    assert again.aborted_between(0, 11) == [AbortedTxn(7, 10, 20)]
    assert again.aborted_between(21, 40) == []
    for i in range(REWRITE_AFTER_LINES):  # committed transactions: nothing to keep
        again.begin(100 + i, 100 + 2 * i)
        again.end(100 + i, 101 + 2 * i, committed=True)
    again.forget_below(15)  # retention passed the aborted one's marker? not yet: kept
    last = PartitionTxns.load(tmp_path, sync=False)
    assert last.open == {8: 11} and last.aborted == [AbortedTxn(7, 10, 20)]
    assert len((tmp_path / "txn-state").read_bytes().splitlines()) < REWRITE_AFTER_LINES
    last.forget_below(21)
    assert PartitionTxns.load(tmp_path, sync=False).aborted == []


def test_an_idle_transactional_id_expires_and_stays_gone_after_a_restart(tmp_path):
    """As Kafka's transactional.id.expiration.ms: an id with no open transaction, idle
    for 7 days, is forgotten (so ids cannot pile up for ever), also in its file."""
    config = BrokerConfig(data_dir=str(tmp_path))
    registry = TopicRegistry(config)
    registry.recover()

    def coordinator() -> TxnCoordinator:
        return TxnCoordinator(registry, registry.producer_ids,
                              TxnStateStore(str(tmp_path), sync=False), lambda g, o: None)

    first = coordinator()
    now = int(time.time() * 1000)
    assert first.init_producer("idle", 60000, -1, -1, now).error == 0
    assert first.init_producer("busy", 60000, -1, -1, now).error == 0
    first.abort_expired(now + ID_EXPIRATION_MS - 60_000)
    assert set(first.txns) == {"idle", "busy"}
    first.txns["busy"].updated_ms = now + ID_EXPIRATION_MS  # written to since
    first.abort_expired(now + ID_EXPIRATION_MS + 60_000)
    assert set(first.txns) == {"busy"}
    assert set(coordinator().txns) == {"busy"}
