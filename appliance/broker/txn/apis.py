"""The transaction APIs on the wire: AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit
and EndTxn, each authorized as Kafka does (WRITE on the transactional id, and on the
topics and groups it names) and then handed to the coordinator, which owns the rules.
InitProducerId and FindCoordinator for a transactional id are answered in ``apis`` (they
also serve idempotent producers and groups) through ``init_producer``.
"""

from __future__ import annotations

import time

from appliance.broker.acl import needs
from appliance.broker.acl.authorizer import Authorizer
from appliance.broker.caller import Caller
from appliance.broker.storage.topic_registry import TopicRegistry
from appliance.broker.txn.coordinator import TxnCoordinator
from appliance.broker.txn.state_store import PendingOffset, TopicPartition
from appliance.broker.wire import errors


def _now_ms() -> int:
    return int(time.time() * 1000)


class TxnApis:
    def __init__(self, coordinator: TxnCoordinator, registry: TopicRegistry,
                 authz: Authorizer) -> None:
        self.coordinator = coordinator
        self.registry = registry
        self.authz = authz

    def init_producer(self, req: dict, caller: Caller) -> dict:
        """InitProducerId with a transactional id."""
        txn_id = req["transactional_id"]
        if not self.authz.allows(caller, needs.INIT_PRODUCER_ID_TXN, txn_id):
            return {"throttle_time_ms": 0, "error_code": needs.TXN_DENIED}
        result = self.coordinator.init_producer(
            txn_id, req["transaction_timeout_ms"], req["producer_id"], req["producer_epoch"],
            _now_ms())
        return {"throttle_time_ms": 0, "error_code": result.error,
                "producer_id": result.producer_id, "producer_epoch": result.epoch}

    def add_partitions_to_txn(self, version: int, req: dict, caller: Caller):
        txn_id = req["transactional_id"]
        wanted = [(t["name"], p) for t in req["topics"] for p in t["partitions"]]
        codes: dict[tuple[str, int], int] = {}
        if not self.authz.allows(caller, needs.ADD_PARTITIONS_TXN, txn_id):
            codes = dict.fromkeys(wanted, needs.TXN_DENIED)
        else:
            for name, p in wanted:
                if not self.authz.allows(caller, needs.ADD_PARTITIONS_TOPIC, name):
                    codes[(name, p)] = errors.TOPIC_AUTHORIZATION_FAILED
                elif self.registry.partition(name, p) is None:
                    codes[(name, p)] = errors.UNKNOWN_TOPIC_OR_PARTITION
            if codes:  # as Kafka: the rest are not attempted
                codes = {k: codes.get(k, errors.OPERATION_NOT_ATTEMPTED) for k in wanted}
            else:
                err = self.coordinator.add_partitions(
                    txn_id, req["producer_id"], req["producer_epoch"],
                    [TopicPartition(n, p) for n, p in wanted], _now_ms())
                codes = dict.fromkeys(wanted, err)
        return {"throttle_time_ms": 0, "results": [
            {"name": t["name"], "results": [{"partition_index": p,
                                             "partition_error_code": codes[(t["name"], p)]}
                                            for p in t["partitions"]]}
            for t in req["topics"]]}

    def add_offsets_to_txn(self, version: int, req: dict, caller: Caller):
        if not self.authz.allows(caller, needs.ADD_OFFSETS_TXN, req["transactional_id"]):
            err = needs.TXN_DENIED
        elif not self.authz.allows(caller, needs.ADD_OFFSETS_GROUP, req["group_id"]):
            err = errors.GROUP_AUTHORIZATION_FAILED
        else:
            err = self.coordinator.add_offsets(req["transactional_id"], req["producer_id"],
                                               req["producer_epoch"], req["group_id"],
                                               _now_ms())
        return {"throttle_time_ms": 0, "error_code": err}

    def txn_offset_commit(self, version: int, req: dict, caller: Caller):
        authz = self.authz
        err = errors.NONE
        if not authz.allows(caller, needs.TXN_OFFSET_COMMIT_TXN, req["transactional_id"]):
            err = needs.TXN_DENIED
        elif not authz.allows(caller, needs.TXN_OFFSET_COMMIT_GROUP, req["group_id"]):
            err = errors.GROUP_AUTHORIZATION_FAILED
        codes: dict[tuple[str, int], int] = {}
        offsets: dict[TopicPartition, PendingOffset] = {}
        for t in req["topics"]:
            denied = not err and not authz.allows(caller, needs.TXN_OFFSET_COMMIT_TOPIC,
                                                  t["name"])
            for p in t["partitions"]:
                key = (t["name"], p["partition_index"])
                if err:
                    codes[key] = err
                elif denied:
                    codes[key] = errors.TOPIC_AUTHORIZATION_FAILED
                else:
                    offsets[TopicPartition(*key)] = PendingOffset(
                        p["committed_offset"], p["committed_leader_epoch"],
                        p["committed_metadata"])
        if offsets:
            done = self.coordinator.commit_offsets_in_txn(
                req["transactional_id"], req["producer_id"], req["producer_epoch"],
                req["group_id"], offsets)
            codes.update(dict.fromkeys(offsets, done))
        return {"throttle_time_ms": 0, "topics": [
            {"name": t["name"], "partitions": [
                {"partition_index": p["partition_index"],
                 "error_code": codes[(t["name"], p["partition_index"])]}
                for p in t["partitions"]]}
            for t in req["topics"]]}

    def end_txn(self, version: int, req: dict, caller: Caller):
        if not self.authz.allows(caller, needs.END_TXN, req["transactional_id"]):
            err = needs.TXN_DENIED
        else:
            err = self.coordinator.end_txn(req["transactional_id"], req["producer_id"],
                                           req["producer_epoch"], req["committed"], _now_ms())
        return {"throttle_time_ms": 0, "error_code": err}
