"""One partition's transactions: which are open, where each began, and which were aborted.

What ``read_committed`` needs of a partition, and nothing more. The last stable offset
(LSO) is the first offset of the oldest transaction still open (the high watermark when
none is): such a consumer is served only below it. An aborted transaction is remembered
as (producer id, first offset, marker offset), so a fetch can list the ones its range
overlaps and the client drops their records (Kafka's ``.txnindex``).

With ``--data-dir`` the state is logged in the partition's ``txn-state`` file (JSON
lines, ``json_lines``; fsynced unless ``--flush write``, which trusts the page cache as
the log itself does): a transaction's start before its first batch is appended, its end
after its marker is. A kill -9 between the two leaves a transaction open here that the
coordinator ends after restart, never a batch of an open transaction this file does not
know.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from appliance.broker.storage.durable_io import StorageError
from appliance.broker.storage.json_lines import JsonLines

FILE_NAME = "txn-state"
REWRITE_AFTER_LINES = 1000  # and four times the entries it holds


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int  # the abort marker's offset


class PartitionTxns:
    def __init__(self, path: Path | None = None, sync: bool = True) -> None:
        self._log = JsonLines(path, sync) if path is not None else None
        self.open: dict[int, int] = {}  # producer id -> first offset of its open txn
        self.aborted: list[AbortedTxn] = []  # in marker order

    @classmethod
    def load(cls, directory: Path, sync: bool = True) -> PartitionTxns:
        """The state logged in ``directory`` (empty if there is none); ValueError if the
        file is not one this broker wrote."""
        out = cls(directory / FILE_NAME, sync)
        assert out._log is not None
        try:
            for line in out._log.read():
                out._replay(line)
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{directory / FILE_NAME}: not a transaction state: {exc}"
                             ) from None
        return out

    def _replay(self, line: dict) -> None:
        if "b" in line:
            pid, first = line["b"]
            self.open.setdefault(int(pid), int(first))
        elif "e" in line:
            pid, marker, committed = line["e"]
            self._ended(int(pid), int(marker), bool(committed))
        elif "f" in line:
            self._forget(int(line["f"]))
        else:
            snap = line["s"]
            self.open = {int(pid): int(first) for pid, first in snap["open"]}
            self.aborted = [AbortedTxn(int(p), int(f), int(last))
                            for p, f, last in snap["aborted"]]

    def last_stable_offset(self, high_watermark: int) -> int:
        return min(self.open.values(), default=high_watermark)

    def begin(self, producer_id: int, first_offset: int) -> None:
        """A transactional batch at ``first_offset``: opens the producer's transaction
        here unless it is open already (logged first: StorageError if it cannot be)."""
        if producer_id in self.open:
            return
        self._write({"b": [producer_id, first_offset]})
        self.open[producer_id] = first_offset

    def end(self, producer_id: int, marker_offset: int, committed: bool) -> None:
        """The producer's marker was appended at ``marker_offset`` (or, committed, was
        found appended already: nothing is recorded aborted)."""
        if producer_id not in self.open:
            return
        self._ended(producer_id, marker_offset, committed)
        self._write_or_keep({"e": [producer_id, marker_offset, committed]})

    def _ended(self, producer_id: int, marker_offset: int, committed: bool) -> None:
        first = self.open.pop(producer_id, None)
        if first is not None and not committed:
            self.aborted.append(AbortedTxn(producer_id, first, marker_offset))

    def aborted_between(self, start: int, end: int) -> list[AbortedTxn]:
        """Aborted transactions holding offsets in ``[start, end)``."""
        return [a for a in self.aborted if a.last_offset >= start and a.first_offset < end]

    def forget_below(self, log_start: int) -> None:
        """Retention moved the log start: aborted transactions wholly below it go."""
        if any(a.last_offset < log_start for a in self.aborted):
            self._forget(log_start)
            self._write_or_keep({"f": log_start})

    def _forget(self, log_start: int) -> None:
        self.aborted = [a for a in self.aborted if a.last_offset >= log_start]

    def _write(self, line: dict) -> None:
        log = self._log
        if log is None:
            return
        live = len(self.open) + len(self.aborted)
        if log.lines >= REWRITE_AFTER_LINES and log.lines > 4 * live:
            snap = {"open": sorted(self.open.items()),
                    "aborted": [list(a) for a in self.aborted]}
            log.rewrite([{"s": snap}])
        log.append([line])

    def _write_or_keep(self, line: dict) -> None:
        """A marker is already in the log: the file catches up at the next write (a
        restart re-ends the transaction from the coordinator's state)."""
        try:
            self._write(line)
        except StorageError:
            pass
