"""The transaction coordinator (KIP-98, KIP-447): one broker, every transactional id.

A transactional id owns one producer id and its current epoch. InitProducerId bumps the
epoch (aborting a transaction the previous holder left open), which fences every older
epoch: the coordinator answers it PRODUCER_FENCED, and partitions refuse its batches
(INVALID_PRODUCER_EPOCH) once a marker of the new epoch reached them. A transaction goes
Empty -> Ongoing (AddPartitionsToTxn, AddOffsetsToTxn) -> PrepareCommit/PrepareAbort
(EndTxn, persisted before any marker) -> CompleteCommit/CompleteAbort (markers written to
every partition it touched; offsets committed in it handed to the group coordinator on
commit, dropped on abort).

Everything runs on the event loop and at once: no transaction is ever left preparing
while the broker runs. The coordinator also answers what the admin tools ask of the
transactions it holds (``listed``, ``described``: KIP-664) and counts how they end
(``counts``, for ``broker_metrics``). After a kill -9 a preparing one is completed at start, and an
Ongoing one is aborted (epoch bumped) once its ``transaction.timeout.ms`` has passed,
like any other that times out (``abort_expired``, on the retention timer).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

from appliance.broker.storage.durable_io import StorageError
from appliance.broker.storage.producer_ids import MAX_EPOCH, ProducerIdError, ProducerIds
from appliance.broker.storage.topic_registry import TopicRegistry
from appliance.broker.txn.state_store import (
    KAFKA_STATE_NAMES,
    PendingOffset,
    TopicPartition,
    TxnState,
    TxnStateStore,
    TxnStatus,
)
from appliance.broker.wire import errors
from appliance.logs import get_logger

log = get_logger("appliance.broker")
MAX_TIMEOUT_MS = 900_000  # Kafka's transaction.max.timeout.ms
ID_EXPIRATION_MS = 604_800_000  # Kafka's transactional.id.expiration.ms (7 days)

# Called with a group and its offsets when a transaction commits them.
OffsetSink = Callable[[str, dict[TopicPartition, PendingOffset]], None]


class InitResult(NamedTuple):
    error: int
    producer_id: int = -1
    epoch: int = -1


class AbortReason:
    """Why a transaction was aborted (``broker_transactions_aborted_total{reason}``)."""

    REQUESTED = "requested"  # the producer's EndTxn
    TIMED_OUT = "timed_out"  # Ongoing past its transaction.timeout.ms
    FENCED = "fenced"  # a new InitProducerId of its id found it open
    RESTART = "restart"  # a decision to abort a crash left preparing, completed at start
    ALL = (REQUESTED, TIMED_OUT, FENCED, RESTART)


@dataclass
class TxnCounts:
    """How transactions ended since the broker started; bumped on the event loop, read
    by a scrape."""

    committed: int = 0
    aborted: dict[str, int] = field(default_factory=dict)  # AbortReason -> count
    fenced: int = 0  # epochs bumped over a producer that held the id (it is fenced)


class Listing(NamedTuple):
    """ListTransactions' answer: the ids that passed the filters, and the state names
    the filters held that Kafka does not know."""

    txns: list[TxnState]
    unknown_states: list[str]


class TxnCoordinator:
    def __init__(self, registry: TopicRegistry, producer_ids: ProducerIds,
                 store: TxnStateStore, commit_offsets: OffsetSink) -> None:
        self.registry = registry
        self.producer_ids = producer_ids
        self.store = store
        self.commit_offsets = commit_offsets
        self.txns: dict[str, TxnState] = {t.transactional_id: t for t in store.load()}
        self.by_pid: dict[int, TxnState] = {t.producer_id: t for t in self.txns.values()}
        self.counts = TxnCounts()

    # -- lifecycle ------------------------------------------------------------------------

    def recover(self, now_ms: int) -> None:
        """Complete what a crash left preparing (the decision was durable), then end any
        transaction a partition still holds open that the coordinator does not."""
        for t in list(self.txns.values()):
            if t.status.preparing:
                self._complete(t, now_ms, AbortReason.RESTART)
                log.info("broker.txn_completed_after_restart", transactional_id=t.
                         transactional_id, status=t.status.value)
        for part in self.registry.all_partitions():
            for pid in list(part.txns.open):
                holder = self.by_pid.get(pid)
                tp = TopicPartition(part.topic, part.index)
                if (holder is not None and holder.status is TxnStatus.ONGOING
                        and tp in holder.partitions):
                    continue  # ended by EndTxn or its timeout
                # its id is gone (transactions.json moved aside), or its marker is in the
                # log and the partition's file missed it (a failed write)
                outcome = part.reconcile_open(pid, now_ms)
                log.warning("broker.txn_state_reconciled", topic=part.topic,
                            partition=part.index, producer_id=pid, outcome=outcome)

    def abort_expired(self, now_ms: int) -> int:
        """Abort every Ongoing transaction past its timeout (its epoch bumped, fencing the
        producer), and forget ids idle for ``ID_EXPIRATION_MS`` with none open; how many
        were aborted."""
        n = 0
        for t in list(self.txns.values()):
            if (t.status in (TxnStatus.EMPTY, TxnStatus.COMPLETE_COMMIT,
                             TxnStatus.COMPLETE_ABORT)
                    and now_ms - t.updated_ms > ID_EXPIRATION_MS):
                try:
                    self.store.forget(t.transactional_id)
                except StorageError:
                    continue  # kept: tried again at the next sweep
                del self.txns[t.transactional_id]
                self.by_pid.pop(t.producer_id, None)
                log.info("broker.txn_id_expired", transactional_id=t.transactional_id)
                continue
            if t.status is TxnStatus.ONGOING and now_ms - t.started_ms > t.timeout_ms:
                self._bump(t)
                self._end(t, commit=False, now_ms=now_ms, reason=AbortReason.TIMED_OUT)
                log.warning("broker.txn_timed_out", transactional_id=t.transactional_id,
                            producer_id=t.producer_id, timeout_ms=t.timeout_ms)
                n += 1
        return n

    # -- InitProducerId ------------------------------------------------------------------

    def init_producer(self, transactional_id: str, timeout_ms: int, producer_id: int,
                      epoch: int, now_ms: int) -> InitResult:
        if not 0 < timeout_ms <= MAX_TIMEOUT_MS:
            return InitResult(errors.INVALID_TRANSACTION_TIMEOUT)
        t = self.txns.get(transactional_id)
        if t is not None and producer_id >= 0 and (
                producer_id != t.producer_id or epoch != t.epoch):
            return InitResult(errors.PRODUCER_FENCED)  # KIP-360: not its current epoch
        if t is not None and t.status.preparing:
            return InitResult(errors.CONCURRENT_TRANSACTIONS)
        try:
            if t is None:
                t = TxnState(transactional_id, self._new_pid(), 0, timeout_ms)
                self.txns[transactional_id] = t
                self.by_pid[t.producer_id] = t
            else:
                self._bump(t)
                if t.status is TxnStatus.ONGOING:  # the previous holder's: aborted
                    self._end(t, commit=False, now_ms=now_ms, reason=AbortReason.FENCED)
            t.timeout_ms = timeout_ms
            if t.status is not TxnStatus.ONGOING:
                t.status = TxnStatus.EMPTY
            self._save(t)
        except (ProducerIdError, StorageError) as exc:
            log.error("broker.txn_state_unwritable", error=str(exc))
            return InitResult(errors.COORDINATOR_NOT_AVAILABLE)
        return InitResult(errors.NONE, t.producer_id, t.epoch)

    def _new_pid(self) -> int:
        return self.producer_ids.issue()

    def _bump(self, t: TxnState) -> None:
        """The next epoch (fencing the producer that held the id); a new producer id when
        the epoch is exhausted."""
        self.counts.fenced += 1
        if t.epoch + 1 >= MAX_EPOCH:
            self.by_pid.pop(t.producer_id, None)
            t.producer_id, t.epoch = self._new_pid(), 0
            self.by_pid[t.producer_id] = t
        else:
            t.epoch += 1

    # -- checks ---------------------------------------------------------------------------

    def check(self, transactional_id: str, producer_id: int, epoch: int) -> int:
        """The error a request of this producer gets before it may change the
        transaction."""
        t = self.txns.get(transactional_id)
        if t is None or t.producer_id != producer_id:
            return errors.INVALID_PRODUCER_ID_MAPPING
        if epoch != t.epoch:
            return errors.PRODUCER_FENCED
        if t.status.preparing:
            return errors.CONCURRENT_TRANSACTIONS
        return errors.NONE

    def produce_refusal(self, producer_id: int, epoch: int, topic: str,
                        partition: int) -> int:
        """A transactional batch's error: its producer must hold the current epoch of a
        transaction that added this partition."""
        t = self.by_pid.get(producer_id)
        if t is None:
            return errors.INVALID_TXN_STATE
        if epoch < t.epoch:
            return errors.INVALID_PRODUCER_EPOCH
        if (t.status is not TxnStatus.ONGOING or epoch != t.epoch
                or TopicPartition(topic, partition) not in t.partitions):
            return errors.INVALID_TXN_STATE
        return errors.NONE

    # -- the transaction's contents -----------------------------------------------------

    def _begin(self, t: TxnState, now_ms: int) -> None:
        if t.status is not TxnStatus.ONGOING:
            t.status = TxnStatus.ONGOING
            t.started_ms = now_ms

    def add_partitions(self, transactional_id: str, producer_id: int, epoch: int,
                       partitions: list[TopicPartition], now_ms: int) -> int:
        err = self.check(transactional_id, producer_id, epoch)
        if err:
            return err
        t = self.txns[transactional_id]
        if t.status is TxnStatus.ONGOING and t.partitions.issuperset(partitions):
            return errors.NONE
        self._begin(t, now_ms)
        t.partitions.update(partitions)
        return self._saved(t)

    def add_offsets(self, transactional_id: str, producer_id: int, epoch: int, group: str,
                    now_ms: int) -> int:
        err = self.check(transactional_id, producer_id, epoch)
        if err:
            return err
        t = self.txns[transactional_id]
        self._begin(t, now_ms)
        t.groups.add(group)
        return self._saved(t)

    def commit_offsets_in_txn(self, transactional_id: str, producer_id: int, epoch: int,
                              group: str, offsets: dict[TopicPartition, PendingOffset]
                              ) -> int:
        err = self.check(transactional_id, producer_id, epoch)
        if err:
            return err
        t = self.txns[transactional_id]
        if t.status is not TxnStatus.ONGOING or group not in t.groups:
            return errors.INVALID_TXN_STATE  # AddOffsetsToTxn comes first
        t.offsets.setdefault(group, {}).update(offsets)
        return self._saved(t)

    # -- EndTxn -------------------------------------------------------------------------

    def end_txn(self, transactional_id: str, producer_id: int, epoch: int, commit: bool,
                now_ms: int) -> int:
        err = self.check(transactional_id, producer_id, epoch)
        t = self.txns.get(transactional_id)
        if err == errors.CONCURRENT_TRANSACTIONS and t is not None:
            # a decision a failed write left preparing: the retry completes it
            same = t.status is (TxnStatus.PREPARE_COMMIT if commit
                                else TxnStatus.PREPARE_ABORT)
            return (self._complete(t, now_ms, AbortReason.REQUESTED) if same
                    else errors.INVALID_TXN_STATE)
        if err:
            return err
        assert t is not None
        if t.status is not TxnStatus.ONGOING:
            done = TxnStatus.COMPLETE_COMMIT if commit else TxnStatus.COMPLETE_ABORT
            return errors.NONE if t.status is done else errors.INVALID_TXN_STATE
        return self._end(t, commit, now_ms, AbortReason.REQUESTED)

    def _end(self, t: TxnState, commit: bool, now_ms: int, reason: str) -> int:
        t.status = TxnStatus.PREPARE_COMMIT if commit else TxnStatus.PREPARE_ABORT
        err = self._saved(t)
        if err:
            t.status = TxnStatus.ONGOING
            return err
        return self._complete(t, now_ms, reason)

    def _complete(self, t: TxnState, now_ms: int, reason: str) -> int:
        """Markers to every partition, the offsets to their groups, then Complete*
        (counted: committed, or aborted for ``reason``)."""
        commit = t.status is TxnStatus.PREPARE_COMMIT
        for tp in sorted(t.partitions):
            part = self.registry.partition(tp.topic, tp.partition)
            if part is None:  # the topic was deleted: nothing to mark
                continue
            appended = part.append_marker(t.producer_id, t.epoch, commit, now_ms)
            if appended.error:
                log.error("broker.txn_marker_failed", transactional_id=t.transactional_id,
                          topic=tp.topic, partition=tp.partition, error=appended.message)
                return errors.COORDINATOR_NOT_AVAILABLE  # retriable: EndTxn again
        if commit:
            for group, offsets in t.offsets.items():
                self.commit_offsets(group, offsets)
        t.status = TxnStatus.COMPLETE_COMMIT if commit else TxnStatus.COMPLETE_ABORT
        if commit:
            self.counts.committed += 1
        else:
            self.counts.aborted[reason] = self.counts.aborted.get(reason, 0) + 1
        t.partitions.clear()
        t.groups.clear()
        t.offsets.clear()
        t.started_ms = -1
        log.info("broker.txn_ended", transactional_id=t.transactional_id,
                 producer_id=t.producer_id, epoch=t.epoch, committed=commit)
        return self._saved(t)

    # -- what the admin tools see (KIP-664) ------------------------------------------------

    def described(self, transactional_id: str) -> TxnState | None:
        return self.txns.get(transactional_id)

    def listed(self, states: list[str], producer_ids: list[int], running_longer_ms: int,
               id_pattern: re.Pattern | None, now_ms: int) -> Listing:
        """The ids ListTransactions answers, Kafka's filters: in one of ``states`` (if
        any), holding one of ``producer_ids`` (if any), whole id matching ``id_pattern``
        (if any), and, when ``running_longer_ms`` is 0 or more, with a transaction open
        longer than that (an id with none open has no start time, so it is left out)."""
        unknown = sorted(set(states) - KAFKA_STATE_NAMES)
        wanted_states, wanted_pids = set(states), set(producer_ids)
        out = [t for t in list(self.txns.values())
               if (not wanted_states or t.status.value in wanted_states)
               and (not wanted_pids or t.producer_id in wanted_pids)
               and (id_pattern is None or id_pattern.fullmatch(t.transactional_id))
               and (running_longer_ms < 0
                    or (t.started_ms >= 0 and now_ms - t.started_ms > running_longer_ms))]
        return Listing(out, unknown)

    def _saved(self, t: TxnState) -> int:
        try:
            self._save(t)
        except StorageError as exc:
            log.error("broker.txn_state_unwritable", error=str(exc))
            return errors.COORDINATOR_NOT_AVAILABLE
        return errors.NONE

    def _save(self, t: TxnState) -> None:
        t.updated_ms = int(time.time() * 1000)
        self.store.save(t, list(self.txns.values()))
