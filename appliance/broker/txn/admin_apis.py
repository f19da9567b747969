"""What ``kafka-transactions`` and the admin clients ask about transactions (KIP-664):
DescribeProducers, DescribeTransactions and ListTransactions, authorized as Kafka does.

An operator looks for a transaction that holds consumers back (a partition's last stable
offset stuck behind it): ListTransactions finds the ids, DescribeTransactions says what one
holds and since when, DescribeProducers shows which producers a partition remembers and
where each one's open transaction began there. The facts are the coordinator's (the
transactional ids) and the partitions' (their producers and open transactions); this
module only answers and filters by ACL:

- DescribeProducers: READ on the topic (``TOPIC_AUTHORIZATION_FAILED`` per partition);
- DescribeTransactions: DESCRIBE on each transactional id
  (``TRANSACTIONAL_ID_AUTHORIZATION_FAILED``), and its partitions only of topics the
  caller may DESCRIBE (the others are left out);
- ListTransactions: only the ids the caller may DESCRIBE (the others are left out).
"""

from __future__ import annotations

import re
import time

from appliance.broker.acl import needs
from appliance.broker.acl.authorizer import Authorizer
from appliance.broker.caller import Caller
from appliance.broker.storage.topic_registry import TopicRegistry
from appliance.broker.txn.coordinator import TxnCoordinator
from appliance.broker.wire import errors


class TxnAdminApis:
    def __init__(self, coordinator: TxnCoordinator, registry: TopicRegistry,
                 authz: Authorizer) -> None:
        self.coordinator = coordinator
        self.registry = registry
        self.authz = authz

    def describe_producers(self, version: int, req: dict, caller: Caller):
        topics = []
        for t in req["topics"]:
            allowed = self.authz.allows(caller, needs.DESCRIBE_PRODUCERS_TOPIC, t["name"])
            parts = []
            for index in t["partition_indexes"]:
                out = {"partition_index": index, "error_code": errors.NONE,
                       "error_message": None, "active_producers": []}
                partition = self.registry.partition(t["name"], index) if allowed else None
                if not allowed:
                    out["error_code"] = errors.TOPIC_AUTHORIZATION_FAILED
                elif partition is None:
                    out["error_code"] = errors.UNKNOWN_TOPIC_OR_PARTITION
                else:
                    out["active_producers"] = [
                        {"producer_id": p.producer_id, "producer_epoch": p.epoch,
                         "last_sequence": p.last_sequence, "last_timestamp": p.last_timestamp,
                         "coordinator_epoch": p.coordinator_epoch,
                         "current_txn_start_offset": txn_start}
                        for p, txn_start in partition.active_producers()]
                parts.append(out)
            topics.append({"name": t["name"], "partitions": parts})
        return {"throttle_time_ms": 0, "topics": topics}

    def describe_transactions(self, version: int, req: dict, caller: Caller):
        states = []
        for txn_id in req["transactional_ids"]:
            out = {"error_code": errors.NONE, "transactional_id": txn_id,
                   "transaction_state": "", "transaction_timeout_ms": 0,
                   "transaction_start_time_ms": -1, "producer_id": -1, "producer_epoch": -1,
                   "topics": []}
            t = self.coordinator.described(txn_id)
            if not self.authz.allows(caller, needs.DESCRIBE_TRANSACTIONS_TXN, txn_id):
                out["error_code"] = needs.TXN_DENIED
            elif not txn_id:
                out["error_code"] = errors.INVALID_REQUEST  # as Kafka: no empty id
            elif t is None:
                out["error_code"] = errors.TRANSACTIONAL_ID_NOT_FOUND
            else:
                by_topic: dict[str, list[int]] = {}
                for tp in sorted(t.partitions):
                    by_topic.setdefault(tp.topic, []).append(tp.partition)
                out.update(transaction_state=t.status.value,
                           transaction_timeout_ms=t.timeout_ms,
                           transaction_start_time_ms=t.started_ms,
                           producer_id=t.producer_id, producer_epoch=t.epoch,
                           topics=[{"topic": name, "partitions": parts}
                                   for name, parts in by_topic.items()
                                   if self.authz.allows(caller,
                                                        needs.DESCRIBE_TRANSACTIONS_TOPIC,
                                                        name)])
            states.append(out)
        return {"throttle_time_ms": 0, "transaction_states": states}

    def list_transactions(self, version: int, req: dict, caller: Caller):
        pattern = None
        if req["transactional_id_pattern"]:  # v2 (KIP-1152): Python's re, whole ids
            try:
                pattern = re.compile(req["transactional_id_pattern"])
            except re.error:
                return {"throttle_time_ms": 0, "error_code": errors.INVALID_REGULAR_EXPRESSION,
                        "unknown_state_filters": [], "transaction_states": []}
        listing = self.coordinator.listed(req["state_filters"], req["producer_id_filters"],
                                          req["duration_filter"], pattern,
                                          int(time.time() * 1000))
        return {"throttle_time_ms": 0, "error_code": errors.NONE,
                "unknown_state_filters": listing.unknown_states,
                "transaction_states": [
                    {"transactional_id": t.transactional_id, "producer_id": t.producer_id,
                     "transaction_state": t.status.value}
                    for t in listing.txns
                    if self.authz.allows(caller, needs.LIST_TRANSACTIONS_TXN,
                                         t.transactional_id)]}
