"""The producer ids this broker hands out (InitProducerId), and only those.

A producer id is trusted with a partition's de-duplication state, so a batch may carry
only an id this broker issued: below the counter (and, in memory, at or above where this
run's counter started). The counter never goes back: with ``--data-dir`` it is persisted
a block of ``BLOCK`` ids ahead (``DATA_DIR/producer-ids``, written durably before an id of
the block is handed out; a restart continues after the block), so an id is never issued
twice and no id written into a batch by a client (2^63-1, say) can move it.

Epoch bumps (InitProducerId v3+ with the producer's current id and epoch, after a
client-side error) are served for the ``REMEMBERED`` most recent ids; an older one gets a
new id instead, which clients accept.
"""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path

from appliance.broker.storage.durable_io import replace_file

BLOCK = 1000
FILE_NAME = "producer-ids"
REMEMBERED = 10_000
MAX_EPOCH = 32766


class ProducerIdError(Exception):
    """The next block of ids could not be persisted (disk full): nothing was issued."""


class ProducerIds:
    def __init__(self, data_dir: str | None, now_ms: int) -> None:
        self._path = Path(data_dir) / FILE_NAME if data_dir else None
        stored = None
        if self._path is not None:
            try:
                stored = int(self._path.read_text())
            except (FileNotFoundError, ValueError):
                stored = None
        # A fresh counter starts at the clock (ms), as this broker's ids always did: ids an
        # older run issued were below its own start time plus one per request.
        self.next = stored if stored is not None else now_ms
        self.first = 0 if self._path is not None else self.next
        self._block_end = self.next  # nothing of a block persisted yet
        self._epochs: OrderedDict[int, int] = OrderedDict()

    def issued(self, pid: int) -> bool:
        return self.first <= pid < self.next

    def issue(self) -> int:
        """A new producer id (epoch 0); ProducerIdError if its block cannot be persisted."""
        if self._path is not None and self.next >= self._block_end:
            end = self.next + BLOCK
            try:
                replace_file(self._path, str(end).encode())
            except OSError as exc:
                raise ProducerIdError(f"cannot persist {self._path}: {exc}") from exc
            self._block_end = end
        pid = self.next
        self.next += 1
        self._remember(pid, 0)
        return pid

    def bump(self, pid: int, epoch: int) -> int | None:
        """The next epoch of ``pid`` if ``epoch`` is its current one, else None."""
        if self._epochs.get(pid) != epoch or epoch >= MAX_EPOCH:
            return None
        self._remember(pid, epoch + 1)
        return epoch + 1

    def _remember(self, pid: int, epoch: int) -> None:
        self._epochs[pid] = epoch
        self._epochs.move_to_end(pid)
        while len(self._epochs) > REMEMBERED:
            self._epochs.popitem(last=False)
