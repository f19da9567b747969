"""Committed consumer offsets, for clients that ``assign()`` partitions and commit.

Group *membership* (JoinGroup/SyncGroup/Heartbeat) is out of scope, but most clients
set a group id and read/commit offsets even with ``assign()``; without a coordinator
they would wait forever for their committed positions. So this broker is the
coordinator for offsets only: kept in memory, and in ``DATA_DIR/consumer_offsets.json``
(rewritten atomically per commit) when durable.
"""

from __future__ import annotations

import json
import os
from pathlib import Path


class OffsetStore:
    def __init__(self, data_dir: str | None = None) -> None:
        self._path = Path(data_dir) / "consumer_offsets.json" if data_dir else None
        # group -> topic -> partition -> (offset, leader_epoch, metadata)
        self._offsets: dict[str, dict[str, dict[int, tuple[int, int, str | None]]]] = {}
        if self._path is not None and self._path.exists():
            raw = json.loads(self._path.read_text())
            self._offsets = {g: {t: {int(p): tuple(v) for p, v in parts.items()}
                                 for t, parts in topics.items()}
                             for g, topics in raw.items()}

    def commit(self, group: str, topic: str, partition: int, offset: int, leader_epoch: int,
               metadata: str | None) -> None:
        self._offsets.setdefault(group, {}).setdefault(topic, {})[partition] = (
            offset, leader_epoch, metadata)

    def fetch(self, group: str, topic: str, partition: int) -> tuple[int, int, str | None]:
        """(offset, leader_epoch, metadata); offset -1 when nothing was committed."""
        return self._offsets.get(group, {}).get(topic, {}).get(partition, (-1, -1, ""))

    def committed_topics(self, group: str) -> dict[str, list[int]]:
        return {t: sorted(parts) for t, parts in self._offsets.get(group, {}).items()}

    def forget_topic(self, topic: str) -> None:
        for topics in self._offsets.values():
            topics.pop(topic, None)

    def save(self) -> None:
        if self._path is None:
            return
        tmp = self._path.with_suffix(".tmp")
        tmp.write_text(json.dumps({g: {t: {str(p): list(v) for p, v in parts.items()}
                                       for t, parts in topics.items()}
                                   for g, topics in self._offsets.items()}))
        os.replace(tmp, self._path)

