"""One partition's transactions: which are open, where each began, and which were aborted.

What ``read_committed`` needs of a partition, and nothing more. The last stable offset
(LSO) is the first offset of the oldest transaction still open (the high watermark when
none is): such a consumer is served only below it. An aborted transaction is remembered
as (producer id, first offset, marker offset), so a fetch can list the ones its range
overlaps and the client drops their records (Kafka's ``.txnindex``).

With ``--data-dir`` the state is kept in the partition's ``txn-state`` file, written
durably before a transaction's first batch is appended and after its marker is: a kill -9
between the two leaves a transaction open here that the coordinator ends after restart,
never a batch of an open transaction that this file does not know.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import NamedTuple

from appliance.broker.storage.durable_io import StorageError, replace_file

FILE_NAME = "txn-state"


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int  # the abort marker's offset


class PartitionTxns:
    def __init__(self, path: Path | None = None) -> None:
        self._path = path
        self.open: dict[int, int] = {}  # producer id -> first offset of its open txn
        self.aborted: list[AbortedTxn] = []  # in marker order

    @classmethod
    def load(cls, directory: Path) -> PartitionTxns:
        """The state kept in ``directory`` (empty if there is none); ValueError if the
        file is not one this broker wrote."""
        out = cls(directory / FILE_NAME)
        try:
            doc = json.loads((directory / FILE_NAME).read_bytes())
        except FileNotFoundError:
            return out
        try:
            out.open = {int(pid): int(first) for pid, first in doc["open"]}
            out.aborted = [AbortedTxn(int(p), int(f), int(last))
                           for p, f, last in doc["aborted"]]
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{directory / FILE_NAME}: not a transaction state: {exc}"
                             ) from None
        return out

    def last_stable_offset(self, high_watermark: int) -> int:
        return min(self.open.values(), default=high_watermark)

    def begin(self, producer_id: int, first_offset: int) -> None:
        """A transactional batch at ``first_offset``: opens the producer's transaction
        here unless it is open already (persisted first: StorageError if it cannot be)."""
        if producer_id in self.open:
            return
        self.open[producer_id] = first_offset
        try:
            self._save()
        except StorageError:
            del self.open[producer_id]
            raise

    def end(self, producer_id: int, marker_offset: int, committed: bool) -> None:
        """The producer's marker was appended at ``marker_offset`` (or, committed, was
        found appended already: nothing is recorded aborted)."""
        first = self.open.pop(producer_id, None)
        if first is not None and not committed:
            self.aborted.append(AbortedTxn(producer_id, first, marker_offset))
        if first is not None:
            self._save_or_keep()

    def aborted_between(self, start: int, end: int) -> list[AbortedTxn]:
        """Aborted transactions holding offsets in ``[start, end)``."""
        return [a for a in self.aborted if a.last_offset >= start and a.first_offset < end]

    def forget_below(self, log_start: int) -> None:
        """Retention moved the log start: aborted transactions wholly below it go."""
        kept = [a for a in self.aborted if a.last_offset >= log_start]
        if len(kept) != len(self.aborted):
            self.aborted = kept
            self._save_or_keep()

    def _save(self) -> None:
        if self._path is None:
            return
        doc = {"open": sorted(self.open.items()), "aborted": [list(a) for a in self.aborted]}
        try:
            replace_file(self._path, json.dumps(doc, separators=(",", ":")).encode())
        except OSError as exc:
            raise StorageError("write", self._path, exc) from exc

    def _save_or_keep(self) -> None:
        """A marker is already in the log: the file catches up at the next write (a
        restart re-ends the transaction from the coordinator's state)."""
        try:
            self._save()
        except StorageError:
            pass
