"""Committed consumer offsets, and the generation each group reached.

Kept in memory, and with ``--data-dir`` in an append-only log,
``DATA_DIR/consumer_offsets.log``: one JSON line per change, all lines of one request in
one ``write()`` before the response leaves, so an acknowledged commit survives kill -9
(as produce does under ``--flush write``; ``--flush fsync``/``interval`` also fsync each
commit). Rewriting a whole file per commit, as before, cost O(every offset of every
group) per commit; appending costs the commit itself. When the log holds several times
more lines than live entries it is rewritten, atomically, with only the live ones.

A write that fails or is short (disk full) is undone: the file is cut back to its last
whole line, the in-memory state is left as it was, and the commit is refused
(``OffsetStoreError``), so no torn line is ever left between good ones. Recovery replays
the log, skips a line it cannot read (logged as ``broker.offsets_log_skipped``, and the
log rewritten without it) and keeps every line after it; a torn last line (the process
died mid-write: that request was never answered) is cut off. An older
``consumer_offsets.json`` is read once and carried over.

The generation is kept so a group that restarts with the broker continues counting
instead of starting again at 1 (tools and logs compare generations). A classic group that
was stable keeps its members too (``GroupRecord.stable``, written when it becomes stable
and dropped when it rebalances), as Kafka's coordinator loads a group's last metadata
record: members that heartbeat within their session after the restart keep their
assignment, and no rebalance takes their partitions away. A KIP-848 consumer
group is kept whole (its epochs, members, their assignments and the target: an opaque
snapshot its coordinator, ``consumer_groups``, writes on every change and reads back), so
its members go on heartbeating across a restart.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import NamedTuple

from appliance.broker.storage.durable_io import fsync_dir
from appliance.logs import get_logger

log = get_logger("appliance.broker")
LOG_NAME = "consumer_offsets.log"
LEGACY_NAME = "consumer_offsets.json"
_COMPACT_MIN_LINES = 10_000
_COMPACT_RATIO = 4


class Committed(NamedTuple):
    offset: int
    leader_epoch: int
    metadata: str | None
    commit_ms: int


class OffsetStoreError(Exception):
    """A commit could not be written (and was undone): the message names the file."""


class OffsetKey(NamedTuple):
    topic: str
    partition: int


class GroupRecord(NamedTuple):
    """What survives of a group besides its offsets."""

    generation: int
    protocol_type: str | None
    #: A classic group's last stable state (its coordinator's snapshot: protocol, leader,
    #: members and assignments), None while it rebalances or is empty.
    stable: dict | None = None


class OffsetStore:
    def __init__(self, data_dir: str | None = None, fsync: bool = False) -> None:
        self._path = Path(data_dir) / LOG_NAME if data_dir else None
        self._fsync = fsync
        self._offsets: dict[str, dict[OffsetKey, Committed]] = {}
        self._groups: dict[str, GroupRecord] = {}
        self._consumer_groups: dict[str, dict] = {}  # KIP-848 groups' snapshots
        self._fd: int | None = None
        self._lines = 0
        self._size = 0  # bytes of whole lines in the log
        if self._path is not None:
            self._recover()
            self._fd = os.open(self._path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            self._size = os.fstat(self._fd).st_size
            if self._fsync:
                fsync_dir(self._path.parent)  # a new log's name is durable from the start

    # -- reads ----------------------------------------------------------------------------

    def fetch(self, group: str, topic: str, partition: int) -> Committed | None:
        return self._offsets.get(group, {}).get(OffsetKey(topic, partition))

    def committed(self, group: str) -> dict[OffsetKey, Committed]:
        """A copy of the group's committed offsets (safe to read off the event loop)."""
        return dict(self._offsets.get(group, {}))

    def committed_topics(self, group: str) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for key in sorted(self._offsets.get(group, {})):
            out.setdefault(key.topic, []).append(key.partition)
        return out

    def read_through(self, topic: str, partition: int) -> int | None:
        """The lowest offset any group committed on the partition: every group that
        commits there has read what lies below it. None: no group commits there."""
        key = OffsetKey(topic, partition)
        found = [o[key].offset for o in self._offsets.values() if key in o]
        return min(found) if found else None

    def has_offsets(self, group: str) -> bool:
        return bool(self._offsets.get(group))

    def groups(self) -> list[str]:
        """Every group with offsets or a recorded generation."""
        return sorted(set(self._offsets) | set(self._groups))

    def group_record(self, group: str) -> GroupRecord | None:
        return self._groups.get(group)

    def consumer_groups(self) -> dict[str, dict]:
        """Every KIP-848 consumer group's last snapshot."""
        return dict(self._consumer_groups)

    # -- writes (each call is one durable write) -------------------------------------------

    def commit(self, group: str, entries: list[tuple[OffsetKey, Committed]]) -> None:
        """Record the commits, durably first; OffsetStoreError leaves nothing changed."""
        if not entries:
            return
        self._append([{"c": [group, k.topic, k.partition, *v]} for k, v in entries])
        offsets = self._offsets.setdefault(group, {})
        for key, value in entries:
            offsets[key] = value
        self._maybe_compact()

    def newest_commit_ms(self, group: str) -> int:
        return max((c.commit_ms for c in self._offsets.get(group, {}).values()), default=-1)

    def delete_offsets(self, group: str, keys: list[OffsetKey]) -> None:
        offsets = self._offsets.get(group, {})
        gone = [k for k in keys if offsets.pop(k, None) is not None]
        if not offsets:
            self._offsets.pop(group, None)
        self._append_or_log([{"d": [group, k.topic, k.partition]} for k in gone])

    def delete_group(self, group: str) -> None:
        if (self._offsets.pop(group, None) is not None or self._groups.pop(group, False)
                or self._consumer_groups.pop(group, None) is not None):
            self._append_or_log([{"dg": group}])

    def forget_topic(self, topic: str) -> None:
        touched = False
        for group in list(self._offsets):
            offsets = self._offsets[group]
            for key in [k for k in offsets if k.topic == topic]:
                del offsets[key]
                touched = True
            if not offsets:
                del self._offsets[group]
        if touched:
            self._append_or_log([{"dt": topic}])

    def record_generation(self, group: str, generation: int, protocol_type: str | None,
                          stable: dict | None = None) -> None:
        """The group's generation, and its members once ``stable`` (replacing the last)."""
        self._groups[group] = GroupRecord(generation, protocol_type, stable)
        self._append_or_log([{"g": [group, generation, protocol_type, stable]}])
        self._maybe_compact()

    def record_consumer_group(self, group: str, snapshot: dict) -> None:
        """The consumer group's whole state, replacing the last (a failed write is
        logged: after a restart the group is as it was at its last written change)."""
        self._consumer_groups[group] = snapshot
        self._append_or_log([{"cg": [group, snapshot]}])
        self._maybe_compact()

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    # -- the log --------------------------------------------------------------------------

    def _append(self, records: list[dict]) -> None:
        """One write of whole lines, or none: a failed or short write is cut back."""
        if self._fd is None or not records:
            return
        data = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records).encode()
        try:
            written = os.write(self._fd, data)
            if written != len(data):
                raise OSError(f"short write, {written} of {len(data)} bytes (disk full?)")
            if self._fsync:
                os.fsync(self._fd)
        except OSError as exc:
            try:
                os.ftruncate(self._fd, self._size)
            except OSError:
                pass  # the next recovery cuts it (a torn line is skipped, never trusted)
            raise OffsetStoreError(f"{self._path}: {exc}") from exc
        self._size += len(data)
        self._lines += len(records)

    def _append_or_log(self, records: list[dict]) -> None:
        """For changes already made in memory (deletions, generations): a write that
        fails is logged; after a restart the change may be missing (a deletion undone)."""
        try:
            self._append(records)
        except OffsetStoreError as exc:
            log.error("broker.offsets_write_failed", error=str(exc))

    def _maybe_compact(self) -> None:
        live = (sum(map(len, self._offsets.values())) + len(self._groups)
                + len(self._consumer_groups))
        if self._lines > _COMPACT_MIN_LINES and self._lines > _COMPACT_RATIO * live:
            self._compact()

    def _apply(self, r: dict) -> None:
        if "c" in r:
            group, topic, partition, offset, epoch, metadata, ts = r["c"]
            self._offsets.setdefault(group, {})[OffsetKey(topic, partition)] = Committed(
                offset, epoch, metadata, ts)
        elif "d" in r:
            group, topic, partition = r["d"]
            offsets = self._offsets.get(group, {})
            offsets.pop(OffsetKey(topic, partition), None)
            if not offsets:
                self._offsets.pop(group, None)
        elif "dg" in r:
            self._offsets.pop(r["dg"], None)
            self._groups.pop(r["dg"], None)
            self._consumer_groups.pop(r["dg"], None)
        elif "cg" in r:
            group, snapshot = r["cg"]
            self._consumer_groups[group] = snapshot
        elif "dt" in r:
            for group in list(self._offsets):
                offsets = self._offsets[group]
                for key in [k for k in offsets if k.topic == r["dt"]]:
                    del offsets[key]
                if not offsets:
                    del self._offsets[group]
        elif "g" in r:
            group, generation, protocol_type, *stable = r["g"]  # no members before they were kept
            self._groups[group] = GroupRecord(generation, protocol_type,
                                              stable[0] if stable else None)

    def _recover(self) -> None:
        assert self._path is not None
        legacy = self._path.with_name(LEGACY_NAME)
        if not self._path.exists() and legacy.exists():
            raw = json.loads(legacy.read_text())
            for group, topics in raw.items():
                for topic, parts in topics.items():
                    for p, (offset, epoch, metadata) in parts.items():
                        self._offsets.setdefault(group, {})[OffsetKey(topic, int(p))] = (
                            Committed(offset, epoch, metadata, -1))
            self._rewrite()
            legacy.unlink()
            return
        if not self._path.exists():
            return
        data = self._path.read_bytes()
        skipped = 0
        for line in data.splitlines(keepends=True):
            if not line.endswith(b"\n"):
                break  # torn tail: never acknowledged
            try:
                self._apply(json.loads(line))
            except (ValueError, TypeError, KeyError):
                skipped += 1  # a line a failed write tore: the ones after it still count
                continue
            self._lines += 1
        whole = data.rfind(b"\n") + 1
        if whole < len(data):  # cut the torn tail: the next line must start a line
            with open(self._path, "r+b") as f:
                f.truncate(whole)
        if skipped:
            log.warning("broker.offsets_log_skipped", file=str(self._path), lines=skipped)
            try:
                self._rewrite()  # only readable lines from here on
            except OSError as exc:  # disk full: the unreadable lines are skipped again
                log.error("broker.offsets_write_failed", error=str(exc))

    def _compact(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        try:
            self._rewrite()
        except OSError as exc:  # disk full: keep appending to the old log
            log.error("broker.offsets_write_failed", error=str(exc))
        assert self._path is not None
        self._fd = os.open(self._path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._size = os.fstat(self._fd).st_size

    def _rewrite(self) -> None:
        """Write only the live entries to a new file and swap it in atomically."""
        assert self._path is not None
        records: list[dict] = [{"g": [g, rec.generation, rec.protocol_type, rec.stable]}
                               for g, rec in self._groups.items()]
        records += [{"cg": [g, snapshot]} for g, snapshot in self._consumer_groups.items()]
        records += [{"c": [g, k.topic, k.partition, *v]}
                    for g, offsets in self._offsets.items() for k, v in offsets.items()]
        tmp = self._path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            f.write("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self._path)
        if self._fsync:
            fsync_dir(self._path.parent)  # the swapped-in name survives a power cut too
        self._lines = len(records)
