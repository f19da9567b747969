"""Each transactional id's state, and where it is kept: ``DATA_DIR/transactions.json``.

The file is a log of JSON lines (``storage.json_lines``), one transactional id's whole
state a line, appended (fsynced unless ``--flush write``) at every change the
coordinator must not forget across a kill -9: a new producer epoch, partitions or a
group joining a transaction, offsets committed in it, the decision to commit or abort
(``PrepareCommit``/``PrepareAbort``, written before any marker) and its completion. The
newest line of an id wins; the file is rewritten with one line per id once it holds four
times more lines than ids (and at least ``REWRITE_AFTER_LINES``). Without
``--data-dir`` the state lives in memory only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import NamedTuple

from appliance.broker.storage.json_lines import JsonLines

FILE_NAME = "transactions.json"
REWRITE_AFTER_LINES = 1000


class TxnStatus(Enum):
    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"

    @property
    def preparing(self) -> bool:
        return self in (TxnStatus.PREPARE_COMMIT, TxnStatus.PREPARE_ABORT)


# Every state name Kafka's coordinator has: a ListTransactions filter naming another is
# reported back as unknown. This broker never holds the last two (it never fences an
# epoch mid-prepare, and forgets an expired id at once instead of marking it Dead).
KAFKA_STATE_NAMES = frozenset({s.value for s in TxnStatus} | {"PrepareEpochFence", "Dead"})


class TopicPartition(NamedTuple):
    topic: str
    partition: int


class PendingOffset(NamedTuple):
    """An offset committed inside a transaction: the group's only once it commits."""

    offset: int
    leader_epoch: int
    metadata: str | None


@dataclass
class TxnState:
    transactional_id: str
    producer_id: int
    epoch: int
    timeout_ms: int
    status: TxnStatus = TxnStatus.EMPTY
    partitions: set[TopicPartition] = field(default_factory=set)
    groups: set[str] = field(default_factory=set)
    offsets: dict[str, dict[TopicPartition, PendingOffset]] = field(default_factory=dict)
    started_ms: int = -1  # when it became Ongoing (its timeout counts from here)
    updated_ms: int = 0  # its last change (an idle id expires)

    def to_json(self) -> dict:
        return {"id": self.transactional_id, "pid": self.producer_id, "epoch": self.epoch,
                "timeout_ms": self.timeout_ms, "status": self.status.value,
                "partitions": sorted(self.partitions), "groups": sorted(self.groups),
                "offsets": {g: [[tp.topic, tp.partition, *o] for tp, o in by_tp.items()]
                            for g, by_tp in self.offsets.items()},
                "started_ms": self.started_ms, "updated_ms": self.updated_ms}

    @classmethod
    def from_json(cls, doc: dict) -> TxnState:
        return cls(str(doc["id"]), int(doc["pid"]), int(doc["epoch"]), int(doc["timeout_ms"]),
                   TxnStatus(doc["status"]),
                   {TopicPartition(str(t), int(p)) for t, p in doc["partitions"]},
                   {str(g) for g in doc["groups"]},
                   {str(g): {TopicPartition(str(t), int(p)): PendingOffset(int(o), int(e), m)
                             for t, p, o, e, m in rows}
                    for g, rows in doc["offsets"].items()},
                   int(doc["started_ms"]), int(doc.get("updated_ms", 0)))


class TxnStateError(Exception):
    """The transaction state file exists but cannot be read: the broker stops rather than
    forget open transactions (their partitions' consumers would wait forever)."""


class TxnStateStore:
    def __init__(self, data_dir: str | None, sync: bool = True) -> None:
        self.path = Path(data_dir) / FILE_NAME if data_dir else None
        self._log = JsonLines(self.path, sync) if self.path is not None else None

    def load(self) -> list[TxnState]:
        if self._log is None:
            return []
        try:
            newest: dict[str, TxnState] = {}
            for line in self._log.read():
                if line.get("expired"):
                    newest.pop(str(line["id"]), None)
                    continue
                state = TxnState.from_json(line)
                newest[state.transactional_id] = state
            return list(newest.values())
        except (KeyError, TypeError, ValueError) as exc:
            raise TxnStateError(f"{self.path}: not a transaction state file ({exc}); "
                                f"move it aside to start without the transactions it holds"
                                ) from None

    def save(self, state: TxnState, every: list[TxnState]) -> None:
        """Log ``state`` (one of ``every``, all ids' states); StorageError if it could not
        be written (nothing of it kept)."""
        log = self._log
        if log is None:
            return
        if log.lines >= REWRITE_AFTER_LINES and log.lines > 4 * len(every):
            log.rewrite([s.to_json() for s in every])
        else:
            log.append([state.to_json()])

    def forget(self, transactional_id: str) -> None:
        """The id expired: logged gone (StorageError if that could not be written)."""
        if self._log is not None:
            self._log.append([{"id": transactional_id, "expired": True}])
